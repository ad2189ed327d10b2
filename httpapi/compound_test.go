package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// TestCompoundMsgpackBytes: a compound delivery's cf=msgpack body, byte for
// byte: [{"content-type": type (defaulted), kept...}, bin] per part. The
// digests are of the bodies the gateway answered before the format had one
// encoder (mapping.EncodeCompound); short ones are given whole.
func TestCompoundMsgpackBytes(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"none":                "90",
		"one, default type":   "919281ac636f6e74656e742d74797065b86170706c69636174696f6e2f6f637465742d73747265616dc40178",
		"empty body":          "919281ac636f6e74656e742d74797065b06170706c69636174696f6e2f6a736f6ec400",
		"two, typed and kept": "sha256:e0aa6d95398e493de7a39e06e55fd48067f1046ea0317d4eab45a0055af375b8",
		"long strings":        "sha256:4264911e303e375840110302902072b0e3b8a0d3509b9ffd2b7ef5fa685314ce",
		"many kept":           "sha256:ce35495ed1b1e6f8c9dc672b07b3f3495f094ea786dc3ef9e4a4bc3923be0480",
		"many parts":          "sha256:8d66592ea948588e88018712cb0500f2a5d9f9ab37c8d8dd3aeba725c75bca44",
		"large body":          "sha256:36fb377d50cc42b88465491dc6e942953e3daaf0c2fc1a35a844a42d9a345559",
	}
	for _, c := range compoundCases() {
		b, err := compoundMsgpack(c.parts)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := hex.EncodeToString(b)
		if w := want[c.name]; strings.HasPrefix(w, "sha256:") {
			sum := sha256.Sum256(b)
			got = "sha256:" + hex.EncodeToString(sum[:])
		}
		if got != want[c.name] {
			t.Errorf("%s: %s, want %s", c.name, got, want[c.name])
		}
	}
}

type compoundCase struct {
	name  string
	parts []gateway.Message
}

// compoundCases are the compound deliveries whose cf=msgpack bodies
// TestCompoundMsgpackBytes pins: what a delivery's parts hold (kept
// headers unique and sorted by name, as the core decodes them), at the
// boundaries of MessagePack's short and long forms.
func compoundCases() []compoundCase {
	many := make([]gateway.Message, 17) // array 16
	for i := range many {
		many[i] = gateway.Message{Body: []byte{byte(i)}}
	}
	return []compoundCase{
		{"none", nil},
		{"one, default type", []gateway.Message{{Body: []byte("x")}}},
		{"two, typed and kept", []gateway.Message{
			{ContentType: "text/plain", Body: []byte("one")},
			{Body: []byte("two"), Kept: []gateway.Header{{Name: "user-agent", Value: "curl"}, {Name: "x-a", Value: "1"}}},
		}},
		{"empty body", []gateway.Message{{ContentType: "application/json", Body: []byte{}}}},
		{"long strings", []gateway.Message{{
			ContentType: "text/" + strings.Repeat("p", 40),                                   // str8
			Body:        []byte(strings.Repeat("b", 300)),                                    // bin16
			Kept:        []gateway.Header{{Name: "x-long", Value: strings.Repeat("v", 300)}}, // str16
		}}},
		{"many kept", []gateway.Message{{Body: []byte("k"), Kept: func() []gateway.Header {
			h := make([]gateway.Header, 16) // map 16 with content-type
			for i := range h {
				h[i] = gateway.Header{Name: "x-" + string(rune('a'+i)), Value: "v"}
			}
			return h
		}()}}},
		{"many parts", many},
		{"large body", []gateway.Message{{Body: []byte(strings.Repeat("z", 70000))}}}, // bin32
	}
}
