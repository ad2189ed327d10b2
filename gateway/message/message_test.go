package message

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/store"
)

// TestInStore: a message whose body is in the Object Store reports its size
// and its object, and carries no body.
func TestInStore(t *testing.T) {
	m := Message{ContentType: "text/plain", Body: []byte("abc")}
	if Stored(m) || Size(m) != 3 || Content(m).Object != "" {
		t.Fatalf("plain message: stored %v size %d object %q", Stored(m), Size(m), Content(m).Object)
	}
	s := InStore(m, "obj", 1<<30)
	if !Stored(s) || Size(s) != 1<<30 || s.Body != nil {
		t.Fatalf("stored message: stored %v size %d body %d bytes", Stored(s), Size(s), len(s.Body))
	}
	if c := Content(s); c.Object != "obj" || c.ContentType != "text/plain" {
		t.Fatalf("stored content: %+v", c)
	}
	back, err := Decoded(Content(m), nil)
	if err != nil || string(back.Body) != "abc" || back.ContentType != "text/plain" {
		t.Fatalf("Decoded: %+v, %v", back, err)
	}
}

// TestBodyReader: a body up to Max reads whole; one byte more fails with
// ErrTooLarge; the reader's own error comes back inside ErrInvalid.
func TestBodyReader(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    io.Reader
		max  int64
		want error
	}{
		{"fits", strings.NewReader("12345"), 5, nil},
		{"one more", strings.NewReader("123456"), 5, store.ErrTooLarge},
		{"broken", io.MultiReader(strings.NewReader("12"), errReader{}), 5, store.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := NewBodyReader(tc.r, tc.max)
			_, err := io.ReadAll(br)
			if tc.want == nil {
				if err != nil || br.Err() != nil {
					t.Fatalf("read: %v (%v)", err, br.Err())
				}
				return
			}
			if err == nil || br.Err() == nil {
				t.Fatal("no error")
			}
			if got := br.Fail(br.Err()); !errors.Is(got, tc.want) {
				t.Fatalf("Fail: %v, want %v", got, tc.want)
			}
		})
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }
