//go:build linux || darwin || freebsd

package embedded

import "syscall"

// diskSpace is the size of the file system holding dir and the space left
// on it for an unprivileged writer (blocks reserved for root are not).
func diskSpace(dir string) (fsSpace, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return fsSpace{}, err
	}
	// Bsize, as nats-server's own measure uses (Blocks count f_frsize
	// units, which equal it on the file systems in use).
	bs := int64(st.Bsize)
	return fsSpace{total: int64(st.Blocks) * bs, free: int64(st.Bavail) * bs}, nil
}
