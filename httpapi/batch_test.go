package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/alloctest"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

const multipartXX = "multipart/mixed; boundary=XX"

// TestParseBatchRefuses: a batch that holds nothing or does not parse is a
// 400 (ErrInvalid) naming the problem, never an empty success (issue 15 item
// 6), and a body declaring 2^32 parts costs next to nothing (item 1).
func TestParseBatchRefuses(t *testing.T) {
	for _, c := range []struct {
		name, ctype, body, want string
	}{
		{"wrong-boundary", "multipart/mixed; boundary=YY", "--XX\r\n\r\none\r\n--XX--\r\n", "boundary"},
		{"garbage", multipartXX, "garbage", "boundary"},
		{"empty-multipart", multipartXX, "", "boundary"},
		{"only-closing", multipartXX, "--XX--\r\n", "no message"},
		{"no-boundary-param", "multipart/mixed", "--XX\r\n\r\none\r\n--XX--\r\n", "no boundary"},
		{"unterminated", multipartXX, "--XX\r\n\r\none\r\n--XX", "without the closing boundary"},
		{"truncated-part", multipartXX, "--XX\r\n\r\nbroken", "part 1"},
		{"empty-array", mapping.ContentTypeMsgpack, "\x90", "no message"},
		{"empty-msgpack", mapping.ContentTypeMsgpack, "", "truncated"},
		{"issue-array", mapping.ContentTypeMsgpack, "\xdd\xff\xff\xff\xff\x92\x80\xa1x", "4294967295"},
		{"issue-nested", mapping.ContentTypeMsgpack, "\x91\xdd\xff\xff\xff\xff\x80", "4294967295"},
		{"over-max", mapping.ContentTypeMsgpack, "\xdc\x03\xe9" + strings.Repeat("\x92\xc0\xc0", 1001), "at most 1000"},
		{"trailing", mapping.ContentTypeMsgpack, "\x91\x92\xc0\xa1xjunk", "bytes after"},
		{"other-type", "text/plain", "x", "multipart/mixed"},
		{"bad-type", "multipart/mixed; boundary", "x", "content-type"},
	} {
		var err error
		a := alloctest.HeapAllocated(func() { _, err = parseBatch(c.ctype, []byte(c.body)) })
		if !errors.Is(err, gateway.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v; want ErrInvalid mentioning %q", c.name, err, c.want)
		}
		if a > 1<<20 {
			t.Errorf("%s: allocated %d bytes", c.name, a)
		}
	}
}

func TestParseBatchPartLimit(t *testing.T) {
	var b strings.Builder
	for i := range gateway.MaxBatch + 1 {
		fmt.Fprintf(&b, "--XX\r\n\r\n%d\r\n", i)
	}
	b.WriteString("--XX--\r\n")
	if _, err := parseBatch(multipartXX, []byte(b.String())); !errors.Is(err, gateway.ErrInvalid) ||
		!strings.Contains(err.Error(), "at most 1000") {
		t.Errorf("1001 parts: %v", err)
	}
	msgs, err := parseBatch(multipartXX, []byte("--XX\r\ncontent-type: text/plain\r\n\r\none\r\n--XX\r\n\r\ntwo\r\n--XX--"))
	if err != nil || len(msgs) != 2 || msgs[0].ContentType != "text/plain" || string(msgs[1].Body) != "two" {
		t.Errorf("two parts: %+v, %v", msgs, err)
	}
}

// FuzzParseBatch: no panic, only ErrInvalid errors, between 1 and MaxBatch
// messages holding no more bytes than the body, memory in proportion.
func FuzzParseBatch(f *testing.F) {
	f.Add(multipartXX, []byte("--XX\r\ncontent-type: text/plain\r\n\r\none\r\n--XX\r\n\r\ntwo\r\n--XX--\r\n"))
	f.Add("multipart/mixed; boundary=YY", []byte("--XX\r\n\r\none\r\n--XX--\r\n"))
	f.Add(multipartXX, []byte("garbage"))
	f.Add(multipartXX, []byte("--XX\r\n\r\nbroken"))
	f.Add(mapping.ContentTypeMsgpack, []byte("\xdd\xff\xff\xff\xff\x92\x80\xa1x"))
	f.Add(mapping.ContentTypeMsgpack, []byte("\x91\xdd\xff\xff\xff\xff\x80"))
	f.Add(mapping.ContentTypeMsgpack, []byte("\x92\x92\x81\xac"+"content-type\xaatext/plain\xc4\x03one\x92\x80\xa3two"))
	f.Add(mapping.ContentTypeMsgpack, []byte("\x90"))
	f.Fuzz(func(t *testing.T, ctype string, body []byte) {
		var msgs []gateway.Message
		var err error
		// A multipart reader's buffer and header maps are a fixed cost.
		if a := alloctest.HeapAllocated(func() { msgs, err = parseBatch(ctype, body) }); a > 64*uint64(len(body)+len(ctype))+256<<10 {
			t.Fatalf("parsing %d bytes allocated %d", len(body), a)
		}
		if err != nil {
			if !errors.Is(err, gateway.ErrInvalid) {
				t.Fatalf("error without ErrInvalid: %v", err)
			}
			return
		}
		if len(msgs) == 0 || len(msgs) > gateway.MaxBatch {
			t.Fatalf("%d messages accepted", len(msgs))
		}
		total := 0
		for _, m := range msgs {
			total += len(m.Body)
		}
		if total > len(body) {
			t.Fatalf("%d bytes of messages from %d bytes", total, len(body))
		}
		if bytes.Contains([]byte(ctype), []byte("msgpack")) {
			if _, err := gateway.EncodeCompound(msgs); err != nil {
				t.Fatalf("accepted batch does not encode: %v", err)
			}
		}
	})
}
