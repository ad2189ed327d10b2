package main

// The beanstalkd target: another work queue server on the same machine, as
// a yardstick for the gateway. The bench starts beanstalkd itself (when the
// binary is in PATH) on a free loopback port with its binlog in a temporary
// directory, and speaks beanstalkd's text protocol by hand: one TCP
// connection per client, one request at a time.
//
//	push:       use <tube> (when the connection's tube changes), then
//	            put <pri> 0 <ttr> <bytes>\r\n<body>\r\n -> INSERTED <id>
//	pull:       watch <tube> + ignore <previous> (when the tube changes),
//	            then reserve-with-timeout <secs>
//	            -> RESERVED <id> <bytes>\r\n<body>\r\n, or TIMED_OUT
//	            (waits under a second polled: see bsWait)
//	ack:        delete <id> -> DELETED
//
// A tube change is written in the same packet as the command that follows
// it (beanstalkd reads pipelined commands in order), so it costs no extra
// round trip.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// beanstalkdName is the binary looked up in PATH.
	beanstalkdName = "beanstalkd"
	// beanstalkdDefaultMaxJob is beanstalkd's default maximum job size
	// (-z); the bench raises it when its messages are larger.
	beanstalkdDefaultMaxJob = 65535
	// beanstalkdMaxJob is the largest -z beanstalkd accepts.
	beanstalkdMaxJob = 1 << 30
	// bsPriority and bsTTR are what every put uses: a middle priority
	// (all equal: FIFO within a tube), and the gateway's default message
	// timeout as time-to-run (bench messages are deleted at once).
	bsPriority = 1024
	bsTTR      = 30
	// bsReadBound is the least bound on a job's declared length the
	// client accepts (more when the bench's messages are larger).
	bsReadBound = 64 << 20
	// bsOpTimeout bounds one exchange beyond the reserve's own wait, so
	// that a beanstalkd that stops answering cannot hang the bench.
	bsOpTimeout = 30 * time.Second
)

// lookBeanstalkd finds beanstalkd in the directories of pathList (a PATH
// value) as exec.LookPath does in PATH, except that relative and empty
// entries are passed over: the bench never runs a binary from the current
// directory by accident.
func lookBeanstalkd(pathList string) (string, error) {
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, beanstalkdName)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH", beanstalkdName)
}

// beanstalkdProc is a beanstalkd started by the bench.
type beanstalkdProc struct {
	bin     string
	version string // "beanstalkd 1.12", from -v
	dir     string // temp dir: binlog and log
	logPath string
	addr    string
	maxJob  int
	args    []string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error // valid once exited is closed
	log     *slog.Logger
}

// startBeanstalkd runs bin on a free loopback port with its binlog in a new
// temp dir and a maximum job size of at least maxJob, and waits until it
// accepts connections. A port taken between picking and binding it costs
// another try.
func startBeanstalkd(ctx context.Context, bin string, maxJob int, log *slog.Logger) (*beanstalkdProc, error) {
	dir, err := os.MkdirTemp("", "lmq-bench-beanstalkd-")
	if err != nil {
		return nil, fmt.Errorf("beanstalkd temp dir: %w", err)
	}
	p := &beanstalkdProc{bin: bin, dir: dir, maxJob: min(max(maxJob, beanstalkdDefaultMaxJob), beanstalkdMaxJob), log: log}
	vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	out, _ := exec.CommandContext(vctx, bin, "-v").CombinedOutput()
	cancel()
	p.version = strings.TrimSpace(firstLine(string(out)))
	binlog := filepath.Join(dir, "binlog")
	if err := os.Mkdir(binlog, 0o700); err != nil {
		p.stop()
		return nil, fmt.Errorf("beanstalkd binlog dir: %w", err)
	}
	for attempt := 1; ; attempt++ {
		port, err := freeLoopbackPort()
		if err != nil {
			p.stop()
			return nil, err
		}
		p.addr = fmt.Sprintf("127.0.0.1:%d", port)
		p.args = []string{"-l", "127.0.0.1", "-p", strconv.Itoa(port), "-b", binlog, "-z", strconv.Itoa(p.maxJob)}
		err = p.launch(ctx, attempt)
		if err == nil {
			log.Info("beanstalkd ready", "pid", p.pid(), "addr", p.addr, "binlog", binlog, "version", p.version)
			return p, nil
		}
		p.halt()
		if attempt == 3 || ctx.Err() != nil {
			p.stop()
			return nil, err
		}
		log.Warn("beanstalkd did not start; trying another port", "err", err)
	}
}

func (p *beanstalkdProc) launch(ctx context.Context, attempt int) error {
	p.logPath = filepath.Join(p.dir, fmt.Sprintf("beanstalkd-%d.log", attempt))
	logf, err := os.Create(p.logPath)
	if err != nil {
		return fmt.Errorf("beanstalkd log: %w", err)
	}
	// Not CommandContext: stopped politely by halt, also after a
	// cancelled run.
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	p.log.Info("starting beanstalkd", "bin", p.bin, "args", strings.Join(p.args, " "))
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start beanstalkd: %w", err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited = cmd, exited
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.waitErr = err
		close(exited)
	}()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var d net.Dialer
	for {
		if c, err := d.DialContext(rctx, "tcp", p.addr); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("beanstalkd exited before it was ready: %v\n--- beanstalkd log ---\n%s", p.waitErr, tail(p.logPath, 20))
		case <-rctx.Done():
			return fmt.Errorf("beanstalkd not ready: %w", rctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (p *beanstalkdProc) pid() int {
	if p == nil || p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// halt ends the process: SIGTERM, then SIGKILL after 5 s.
func (p *beanstalkdProc) halt() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		p.log.Warn("beanstalkd did not stop on SIGTERM; killing it", "pid", p.cmd.Process.Pid)
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// stop ends the process and removes its directory (binlog included).
func (p *beanstalkdProc) stop() {
	if p == nil {
		return
	}
	p.halt()
	if err := os.RemoveAll(p.dir); err != nil {
		p.log.Warn("removing beanstalkd dir", "dir", p.dir, "err", err)
	}
}

// alive reports a beanstalkd that exited during the run.
func (p *beanstalkdProc) alive() error {
	if p == nil || p.exited == nil {
		return nil
	}
	select {
	case <-p.exited:
		return fmt.Errorf("beanstalkd exited: %v\n--- beanstalkd log (tail) ---\n%s", p.waitErr, tail(p.logPath, 20))
	default:
		return nil
	}
}

// commandLine is the command the report shows.
func (p *beanstalkdProc) commandLine() string {
	return shellQuote(append([]string{p.bin}, p.args...))
}

// beanstalkdTarget drives a beanstalkd the bench started.
type beanstalkdTarget struct {
	proc  *beanstalkdProc
	addr  string
	bound int // largest job length accepted from the server
}

func newBeanstalkdTarget(p *beanstalkdProc) *beanstalkdTarget {
	return &beanstalkdTarget{proc: p, addr: p.addr, bound: max(bsReadBound, p.maxJob)}
}

func (t *beanstalkdTarget) name() string   { return tBeanstalkd }
func (t *beanstalkdTarget) depth() int     { return 1 }
func (t *beanstalkdTarget) stateful() bool { return true }

func (t *beanstalkdTarget) close() error {
	t.proc.stop()
	return nil
}

func (t *beanstalkdTarget) newClient(ctx context.Context) (client, error) {
	return dialBeanstalkd(ctx, t.addr, t.bound)
}

// setup checks, on a connection of its own, that the tube is empty (a
// reserve that does not wait); beanstalkd makes tubes when they are named.
func (t *beanstalkdTarget) setup(ctx context.Context, queue string) error {
	c, err := dialBeanstalkd(ctx, t.addr, t.bound)
	if err != nil {
		return err
	}
	defer c.close()
	return createByPull(ctx, c, queue)
}

// remove deletes every job of the tube that is ready, delayed or buried (a
// tube with no jobs and no client ceases to exist).
func (t *beanstalkdTarget) remove(ctx context.Context, queue string) error {
	c, err := dialBeanstalkd(ctx, t.addr, t.bound)
	if err != nil {
		return err
	}
	defer c.close()
	return c.purge(ctx, queue)
}

// tubeName maps a bench queue name to a beanstalkd tube name: at most 200
// bytes of letters, digits and +/;.$_()-, not starting with '-'. Valid names
// without '$' stay as they are (the bench's own always do); in others, '$'
// and every byte not allowed (and a leading '-') become '$' and two hex
// digits; an empty result or one over 200 bytes is cut to 182 bytes and
// ends with "$$" and 16 hex digits of the name's SHA-256. A name kept has no
// '$', an escaped one has no "$$", so the mapping stays one-to-one (short of
// a hash collision).
func tubeName(queue string) string {
	if validTube(queue) && strings.IndexByte(queue, '$') < 0 {
		return queue
	}
	var sb strings.Builder
	for i := 0; i < len(queue); i++ {
		c := queue[i]
		if c == '$' || !tubeByte(c) || (i == 0 && c == '-') {
			fmt.Fprintf(&sb, "$%02x", c)
			continue
		}
		sb.WriteByte(c)
	}
	s := sb.String()
	if s == "" || len(s) > 200 {
		sum := sha256.Sum256([]byte(queue))
		s = s[:min(len(s), 182)] + "$$" + hex.EncodeToString(sum[:8])
	}
	return s
}

func validTube(s string) bool {
	if s == "" || len(s) > 200 || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tubeByte(s[i]) {
			return false
		}
	}
	return true
}

func tubeByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("+/;.$_()-", c) >= 0
}

// bsPollInterval is the pause between the reserves that stand in for a
// wait under a second.
const bsPollInterval = 2 * time.Millisecond

// bsWait splits a pull's wait for reserve-with-timeout, which counts whole
// seconds: a wait of a second or more waits whole seconds, rounded down (a
// pull never outlasts what it was asked, which would stretch the end of a
// cell); a shorter one is polled: reserves that do not wait, every
// bsPollInterval until the wait is over (rounding it up to a second would
// let a puller sit on one empty queue of several for a second, as SQS's
// whole seconds do; down to 0, spin).
func bsWait(wait time.Duration) (secs int64, poll bool) {
	if wait < time.Second {
		return 0, wait > 0
	}
	return int64(math.Floor(wait.Seconds())), false
}

// bsConn is one client connection. Its methods are called by one goroutine
// at a time (the target's depth is 1).
type bsConn struct {
	conn  net.Conn
	r     *bufio.Reader
	w     *bufio.Writer
	bound int
	// used and watched are the connection's tubes: the one puts go to and
	// the only one reserves take from ("default" on a new connection).
	used, watched string
	body          bytes.Buffer // the last reserved job's body (and its CRLF)
	broken        error        // set once the stream is no longer in step
}

// errBSAnswer is an answer beanstalkd gives to say no, on a stream still in
// step (BURIED, JOB_TOO_BIG, DEADLINE_SOON, ...).
type errBSAnswer struct {
	op, answer string
}

func (e *errBSAnswer) Error() string {
	return fmt.Sprintf("beanstalkd %s: %s", e.op, e.answer)
}

func dialBeanstalkd(ctx context.Context, addr string, bound int) (*bsConn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("beanstalkd dial %s: %w", addr, err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return &bsConn{
		conn:    conn,
		r:       bufio.NewReaderSize(conn, 64<<10),
		w:       bufio.NewWriterSize(conn, 64<<10),
		bound:   bound,
		used:    "default",
		watched: "default",
	}, nil
}

func (c *bsConn) close() error {
	if err := c.conn.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("beanstalkd close: %w", err)
	}
	return nil
}

// begin starts an exchange whose answer may take wait seconds: it fails on
// a broken connection or a done ctx, and sets the connection's deadline.
func (c *bsConn) begin(ctx context.Context, wait int64) error {
	if c.broken != nil {
		return c.broken
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dl := time.Now().Add(time.Duration(wait)*time.Second + bsOpTimeout)
	if cdl, ok := ctx.Deadline(); ok && cdl.Before(dl) {
		dl = cdl
	}
	return c.conn.SetDeadline(dl)
}

// fail marks the stream out of step (an I/O error, or an answer the bench
// cannot place) and closes the connection; later calls return err.
func (c *bsConn) fail(op string, err error) error {
	if c.broken == nil {
		c.broken = fmt.Errorf("beanstalkd %s: %w (connection closed)", op, err)
		_ = c.conn.Close()
	}
	return c.broken
}

// readLine reads one answer line without its CRLF. It is valid until the
// next read; a line longer than the read buffer is an error.
func (c *bsConn) readLine() ([]byte, error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, errors.New("answer line over 64 KiB")
		}
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("answer line %q does not end in CRLF", snippet(line))
	}
	return line[:len(line)-2], nil
}

// expect reads an answer line that must start with prefix; anything else
// puts the stream out of step.
func (c *bsConn) expect(op, prefix string) error {
	line, err := c.readLine()
	if err != nil {
		return c.fail(op, err)
	}
	if !bytes.HasPrefix(line, []byte(prefix)) {
		return c.fail(op, fmt.Errorf("answer %q", snippet(line)))
	}
	return nil
}

// readJob reads the body of a RESERVED or FOUND answer line (after its
// keyword): "<id> <bytes>", then the body and CRLF. The body lands in
// c.body, which grows as the bytes arrive (not by the declared length up
// front); a declared length over the bound is an error.
func (c *bsConn) readJob(op string, rest []byte) (id string, body []byte, err error) {
	idB, nB, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return "", nil, c.fail(op, fmt.Errorf("malformed answer %q", snippet(rest)))
	}
	if _, err := strconv.ParseUint(string(idB), 10, 64); err != nil {
		return "", nil, c.fail(op, fmt.Errorf("job id %q", snippet(idB)))
	}
	id = string(idB)
	n, err := strconv.ParseUint(string(nB), 10, 64)
	if err != nil {
		return "", nil, c.fail(op, fmt.Errorf("job length %q", snippet(nB)))
	}
	if n > uint64(c.bound) {
		return "", nil, c.fail(op, fmt.Errorf("job of %d bytes declared, over the bound of %d", n, c.bound))
	}
	c.body.Reset()
	if _, err := c.body.ReadFrom(io.LimitReader(c.r, int64(n)+2)); err != nil {
		return "", nil, c.fail(op, err)
	}
	b := c.body.Bytes()
	if uint64(len(b)) != n+2 {
		return "", nil, c.fail(op, io.ErrUnexpectedEOF)
	}
	if b[n] != '\r' || b[n+1] != '\n' {
		return "", nil, c.fail(op, errors.New("job body not followed by CRLF"))
	}
	return id, b[:n], nil
}

func (c *bsConn) writeCmd(parts ...string) {
	for _, p := range parts {
		_, _ = c.w.WriteString(p)
	}
	_, _ = c.w.WriteString("\r\n")
}

func (c *bsConn) flush(op string) error {
	if err := c.w.Flush(); err != nil {
		return c.fail(op, err)
	}
	return nil
}

func (c *bsConn) push(ctx context.Context, queue string, body []byte) error {
	const op = "put"
	if err := c.begin(ctx, 0); err != nil {
		return err
	}
	tube := tubeName(queue)
	use := tube != c.used
	if use {
		c.writeCmd("use ", tube)
	}
	c.writeCmd("put ", strconv.Itoa(bsPriority), " 0 ", strconv.Itoa(bsTTR), " ", strconv.Itoa(len(body)))
	_, _ = c.w.Write(body)
	_, _ = c.w.WriteString("\r\n")
	if err := c.flush(op); err != nil {
		return err
	}
	if use {
		if err := c.expect("use", "USING "); err != nil {
			return err
		}
		c.used = tube
	}
	line, err := c.readLine()
	if err != nil {
		return c.fail(op, err)
	}
	switch {
	case bytes.HasPrefix(line, []byte("INSERTED ")):
		return nil
	case bytes.HasPrefix(line, []byte("BURIED")), bytes.Equal(line, []byte("JOB_TOO_BIG")),
		bytes.Equal(line, []byte("DRAINING")), bytes.Equal(line, []byte("OUT_OF_MEMORY")):
		return &errBSAnswer{op: op, answer: string(line)}
	}
	return c.fail(op, fmt.Errorf("answer %q", snippet(line)))
}

func (c *bsConn) pull(ctx context.Context, queue string, wait time.Duration) ([]byte, func(context.Context) error, error) {
	secs, poll := bsWait(wait)
	if !poll {
		return c.reserve(ctx, queue, secs)
	}
	end := time.Now().Add(wait)
	for {
		body, ack, err := c.reserve(ctx, queue, 0)
		if err != nil || ack != nil {
			return body, ack, err
		}
		left := time.Until(end)
		if left <= 0 {
			return nil, nil, nil
		}
		if err := sleepCtx(ctx, min(left, bsPollInterval)); err != nil {
			return nil, nil, err
		}
	}
}

// reserve is one reserve-with-timeout secs on queue's tube.
func (c *bsConn) reserve(ctx context.Context, queue string, secs int64) ([]byte, func(context.Context) error, error) {
	const op = "reserve"
	if err := c.begin(ctx, secs); err != nil {
		return nil, nil, err
	}
	tube := tubeName(queue)
	change := tube != c.watched
	if change {
		// Watch the new tube before ignoring the old: a connection must
		// watch one tube at least.
		c.writeCmd("watch ", tube)
		c.writeCmd("ignore ", c.watched)
	}
	c.writeCmd("reserve-with-timeout ", strconv.FormatInt(secs, 10))
	if err := c.flush(op); err != nil {
		return nil, nil, err
	}
	if change {
		if err := c.expect("watch", "WATCHING "); err != nil {
			return nil, nil, err
		}
		if err := c.expect("ignore", "WATCHING "); err != nil {
			return nil, nil, err
		}
		c.watched = tube
	}
	line, err := c.readLine()
	if err != nil {
		return nil, nil, c.fail(op, err)
	}
	switch {
	case bytes.Equal(line, []byte("TIMED_OUT")):
		return nil, nil, nil
	case bytes.Equal(line, []byte("DEADLINE_SOON")):
		return nil, nil, &errBSAnswer{op: op, answer: string(line)}
	case !bytes.HasPrefix(line, []byte("RESERVED ")):
		return nil, nil, c.fail(op, fmt.Errorf("answer %q", snippet(line)))
	}
	id, body, err := c.readJob(op, line[len("RESERVED "):])
	if err != nil {
		return nil, nil, err
	}
	ack := func(ctx context.Context) error { return c.deleteJob(ctx, id, false) }
	return body, ack, nil
}

// deleteJob deletes job id. With gone, a job already gone (NOT_FOUND) is
// not an error.
func (c *bsConn) deleteJob(ctx context.Context, id string, gone bool) error {
	const op = "delete"
	if err := c.begin(ctx, 0); err != nil {
		return err
	}
	c.writeCmd("delete ", id)
	if err := c.flush(op); err != nil {
		return err
	}
	line, err := c.readLine()
	if err != nil {
		return c.fail(op, err)
	}
	switch {
	case bytes.Equal(line, []byte("DELETED")):
		return nil
	case bytes.Equal(line, []byte("NOT_FOUND")):
		if gone {
			return nil
		}
		return &errBSAnswer{op: op, answer: "NOT_FOUND"}
	}
	return c.fail(op, fmt.Errorf("answer %q", snippet(line)))
}

// purge deletes the ready, delayed and buried jobs of queue's tube (jobs
// reserved by other connections are theirs to delete).
func (c *bsConn) purge(ctx context.Context, queue string) error {
	tube := tubeName(queue)
	if err := c.begin(ctx, 0); err != nil {
		return err
	}
	c.writeCmd("use ", tube)
	if err := c.flush("use"); err != nil {
		return err
	}
	if err := c.expect("use", "USING "); err != nil {
		return err
	}
	c.used = tube
	for _, peek := range []string{"peek-ready", "peek-delayed", "peek-buried"} {
		for {
			if err := c.begin(ctx, 0); err != nil {
				return err
			}
			c.writeCmd(peek)
			if err := c.flush(peek); err != nil {
				return err
			}
			line, err := c.readLine()
			if err != nil {
				return c.fail(peek, err)
			}
			if bytes.Equal(line, []byte("NOT_FOUND")) {
				break
			}
			if !bytes.HasPrefix(line, []byte("FOUND ")) {
				return c.fail(peek, fmt.Errorf("answer %q", snippet(line)))
			}
			id, _, err := c.readJob(peek, line[len("FOUND "):])
			if err != nil {
				return err
			}
			if err := c.deleteJob(ctx, id, true); err != nil {
				return fmt.Errorf("purging tube %s: %w", tube, err)
			}
		}
	}
	return nil
}
