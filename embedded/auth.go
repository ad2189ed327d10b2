package embedded

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
)

// DefaultUser is the user NATS clients of the client port authenticate as
// when ClientAuth names none.
const DefaultUser = "lmq"

// ClientURLFile is the file in the data directory that holds the client
// port's full URL with a generated password, "nats://lmq:PASSWORD@host:port"
// and a newline, mode 0600. It is written at every start (the address may
// have changed) and its password is reused, so that tools keep working
// across restarts. Any NATS tool connects with it:
//
//	nats --server "$(cat DATA-DIR/nats-client.url)" stream ls
const ClientURLFile = "nats-client.url"

// maxClientURLFile bounds what is read back from ClientURLFile: the file
// written here is well under a hundred bytes.
const maxClientURLFile = 4096

// generatedPasswordBytes of randomness in a generated password (256 bits).
const generatedPasswordBytes = 32

// ClientAuth says how clients of the client port (Options.Listen)
// authenticate. The zero value requires user DefaultUser with a password
// generated on the first start and kept in ClientURLFile.
type ClientAuth struct {
	// None opens the port to anyone who can reach it: every message can be
	// read and every queue changed. Only on an explicit request.
	None bool
	// User clients authenticate as; "" means DefaultUser.
	User string
	// Password of User; "" means the generated one of ClientURLFile. A
	// given password is not written anywhere.
	Password string
}

// clientCredentials resolves the user and password the server requires
// from a, generating and storing a password in dir on the first start.
// generated reports whether the password is ClientURLFile's.
func clientCredentials(dir string, a ClientAuth) (user, password string, generated bool, err error) {
	user = a.User
	if user == "" {
		user = DefaultUser
	}
	if a.Password != "" {
		return user, a.Password, false, nil
	}
	path := filepath.Join(dir, ClientURLFile)
	password, err = readGeneratedPassword(path)
	switch {
	case err == nil:
		return user, password, true, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", "", false, err
	}
	b := make([]byte, generatedPasswordBytes)
	if _, err := rand.Read(b); err != nil {
		return "", "", false, fmt.Errorf("embedded: generate NATS password: %w", err)
	}
	// Base64url's alphabet needs no escaping in a URL's userinfo, so the
	// file's URL reads the same as the password.
	return user, base64.RawURLEncoding.EncodeToString(b), true, nil
}

// readGeneratedPassword returns the password of the URL in the file at
// path; an error wrapping os.ErrNotExist when there is no file.
func readGeneratedPassword(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("embedded: NATS credentials: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxClientURLFile+1))
	if err != nil {
		return "", fmt.Errorf("embedded: NATS credentials %s: %w", path, err)
	}
	bad := func(why string) error {
		return fmt.Errorf("embedded: NATS credentials %s: %s (delete the file to generate new credentials)", path, why)
	}
	if len(b) > maxClientURLFile {
		return "", bad("file too large")
	}
	u, err := url.Parse(string(trimNewline(b)))
	if err != nil {
		// url's error quotes the URL, password included: not repeated here.
		return "", bad("not a URL")
	}
	if u.User == nil {
		return "", bad("no user and password in the URL")
	}
	p, ok := u.User.Password()
	if !ok || p == "" {
		return "", bad("no password in the URL")
	}
	return p, nil
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// clientURL is the URL with credentials a local NATS tool connects to addr
// (the server's listener) with. A wildcard address is reached over
// loopback.
func clientURL(addr net.Addr, user, password string) string {
	host, port := "127.0.0.1", ""
	if ta, ok := addr.(*net.TCPAddr); ok {
		port = fmt.Sprint(ta.Port)
		switch {
		case ta.IP.To4() != nil && ta.IP.IsUnspecified():
		case ta.IP.IsUnspecified():
			host = "::1"
		default:
			host = ta.IP.String()
		}
	} else if h, p, err := net.SplitHostPort(addr.String()); err == nil {
		host, port = h, p
	}
	u := url.URL{Scheme: "nats", User: url.UserPassword(user, password), Host: net.JoinHostPort(host, port)}
	return u.String()
}

// writeClientURL replaces the file at path with u and a newline, mode
// 0600, atomically: a reader sees the old file or the new one, and a crash
// never leaves a half-written file that would make the next start fail.
func writeClientURL(path, u string) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("embedded: write NATS client URL: %w", err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("embedded: write NATS client URL %s: %w", path, err)
	}
	// CreateTemp makes the file 0600 already; Chmod states it, whatever the
	// platform does.
	if err := f.Chmod(0o600); err != nil {
		return fail(err)
	}
	if _, err := io.WriteString(f, u+"\n"); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("embedded: write NATS client URL %s: %w", path, err)
	}
	return nil
}
