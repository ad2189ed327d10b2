package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// startProfile starts a CPU profile of the spawned gateway over a cell's
// duration (--profile), fetched from its pprof listener into the profile
// directory; the function it returns waits for the profile to be written.
// Without --profile, or for a target the gateway does not serve (the
// ceilings, beanstalkd), it does nothing. A failed profile is logged; the cell still counts.
// wait returns the profile's path ("" when none was saved).
func (b *bench) startProfile(ctx context.Context, r cellResult) (wait func() string) {
	base := fmt.Sprintf("%s-%s-c%d-s%d-q%d", r.workload, r.target, r.conc, r.size, r.queues)
	return b.profileFor(ctx, r.target, base, b.cfg.duration)
}

// profileFor is startProfile for any measured span of d (e2e trials too).
func (b *bench) profileFor(ctx context.Context, target, base string, d time.Duration) (wait func() string) {
	if b.cfg.profileDir == "" || b.gw == nil || b.gw.debugAddr == "" || !servedByGateway(target) {
		return func() string { return "" }
	}
	secs := max(1, int(math.Ceil(d.Seconds())))
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", b.gw.debugAddr, secs)
	done := make(chan struct{})
	var saved string
	go func() {
		defer close(done)
		path, err := fetchProfile(ctx, url, b.cfg.profileDir, base, time.Duration(secs)*time.Second)
		if err != nil {
			b.log.Warn("cpu profile", "cell", base, "err", err)
			return
		}
		saved = path
		b.log.Info("cpu profile saved", "path", path)
	}()
	return func() string { <-done; return saved }
}

// fetchProfile saves the profile at url as dir/base.pprof, or base-2.pprof
// and so on when a cell of the same name ran before (--repeat, or the same
// cell in two matrices): no profile overwrites another.
func fetchProfile(ctx context.Context, url, dir, base string, d time.Duration) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("profile dir: %w", err)
	}
	// The profile takes d; a minute more covers a slow answer.
	ctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		return "", fmt.Errorf("fetch: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return "", fmt.Errorf("fetch: %s: %s", resp.Status, b)
	}
	var f *os.File
	var path string
	for i := 1; ; i++ {
		path = filepath.Join(dir, base+".pprof")
		if i > 1 {
			path = filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", base, i))
		}
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("profile file: %w", err)
		}
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}
