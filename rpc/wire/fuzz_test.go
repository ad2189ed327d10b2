package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"time"
)

// fuzzLimits are small so that the fuzzer reaches the limits quickly.
var fuzzLimits = Limits{MaxFrameSize: 1 << 16, MaxDepth: 16, MaxElements: 1024}

// checkDecode runs everything the server does with untrusted bytes and checks
// the invariants that keep it safe: no panic, frames within the limits, every
// frame a single well-formed object, raw-dialect output free of str8 and bin.
func checkDecode(t testing.TB, data []byte) {
	lim := fuzzLimits.WithDefaults()
	fr := NewFrameReader(bufio.NewReader(bytes.NewReader(data)), lim)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) &&
				!errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrTooDeep) {
				t.Fatalf("ReadFrame: unexpected error class %v", err)
			}
			return
		}
		if len(f) > lim.MaxFrameSize {
			t.Fatalf("frame of %d bytes passed a limit of %d", len(f), lim.MaxFrameSize)
		}
		n, err := walk(f, lim.MaxDepth, nil)
		if err != nil || n != len(f) {
			t.Fatalf("ReadFrame returned % x, which walk rejects: %d, %v", f, n, err)
		}
		out, err := Transcode(nil, f, DialectRaw, lim.MaxDepth)
		if err != nil {
			t.Fatalf("Transcode of a valid frame: %v", err)
		}
		if _, err := walk(out, lim.MaxDepth, func(tk token, hdr, _ []byte) {
			if hdr[0] == 0xd9 || tk.kind == kBin {
				t.Fatalf("raw transcoding kept type 0x%02x", hdr[0])
			}
		}); err != nil {
			t.Fatalf("transcoded output does not walk: %v", err)
		}
		budget := lim.MaxElements
		decodeValue(f, lim.MaxDepth, &budget)
		req, err := ParseRequest(f, lim)
		if err != nil {
			continue
		}
		for _, p := range req.Params {
			DecodeString(p)
			DecodeNumber(p)
			budget := lim.MaxElements
			decodeValue(p, lim.MaxDepth, &budget)
		}
	}
}

// fuzzSeeds are valid and nearly valid frames in both dialects.
func fuzzSeeds() [][]byte {
	return [][]byte{
		{0x94, 0x00, 0x01, 0xa4, 'p', 'u', 'l', 'l', 0x91, 0xa3, 'f', 'o', 'o'},
		{0x94, 0x00, 0x01, 0xa4, 'p', 'u', 'l', 'l', 0x92, 0xa3, 'f', 'o', 'o', 0xcb, 0x3f, 0xe0, 0, 0, 0, 0, 0, 0},
		{0x94, 0x00, 0x07, 0xd9, 0x04, 'p', 'u', 's', 'h', 0x92, 0xc4, 0x01, 'q', 0x82, 0xa1, 'a', 0x93, 0x01, 0xc0, 0xc3, 0xa1, 'b', 0xd4, 0x01, 0x00},
		{0x93, 0x02, 0xa4, 'p', 'u', 's', 'h', 0x92, 0xa1, 'q', 0xda, 0x00, 0x01, 'x'},
		{0x94, 0x00, 0x02, 0xac, 'u', 'p', 'd', 'a', 't', 'e', '_', 'p', 'r', 'o', 'p', 's', 0x92, 0xa1, 'q', 0x81, 0xa4, 'p', 'a', 'c', 'k', 0xcb, 0x3f, 0xe0, 0, 0, 0, 0, 0, 0},
		{0x94, 0x00, 0x03, 0xb1, 's', 'e', 't', '_', 'd', 'e', 'f', 'a', 'u', 'l', 't', '_', 'p', 'r', 'o', 'p', 's', 0x91, 0x91, 0x92, 0xa2, '.', '*', 0x81, 0xa5, 'r', 'e', 't', 'r', 'y', 0x00},
		{0xdd, 0xff, 0xff, 0xff, 0xff},
		{0xdb, 0x7f, 0xff, 0xff, 0xff, 'a'},
		append(bytes.Repeat([]byte{0x91}, 20), 0xc0),
		{0xc1},
	}
}

func FuzzDecodeFrame(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data)
	})
}

// TestDecodeRandomCorpus is the fuzz target's bounded run for every `go test`:
// random bytes, seeds with bytes flipped, cut, spliced or repeated, and
// hostile lengths written into them. The seed is fixed so failures repeat.
func TestDecodeRandomCorpus(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	seeds := fuzzSeeds()
	deadline := time.Now().Add(2 * time.Second)
	n := 0
	for ; n < 30000 && time.Now().Before(deadline); n++ {
		var data []byte
		switch r.IntN(5) {
		case 0:
			data = make([]byte, r.IntN(64))
			for i := range data {
				data[i] = byte(r.Uint32())
			}
		case 1, 2:
			data = bytes.Clone(seeds[r.IntN(len(seeds))])
			for range 1 + r.IntN(4) {
				if len(data) == 0 {
					break
				}
				i := r.IntN(len(data))
				switch r.IntN(4) {
				case 0:
					data[i] = byte(r.Uint32())
				case 1:
					data = data[:i]
				case 2: // a length field set to something huge
					data = append(data[:i], append([]byte{0xdb, 0xff, 0xff, 0xff, 0xf0}, data[i:]...)...)
				case 3:
					data = append(data[:i], append([]byte{0xdf, 0x0f, 0xff, 0xff, 0xff}, data[i:]...)...)
				}
			}
		case 3:
			a, b := seeds[r.IntN(len(seeds))], seeds[r.IntN(len(seeds))]
			data = append(bytes.Clone(a[:r.IntN(len(a)+1)]), b[r.IntN(len(b)+1):]...)
		case 4:
			data = bytes.Repeat(seeds[r.IntN(len(seeds))], 1+r.IntN(5))
		}
		checkDecode(t, data)
	}
	t.Logf("%d inputs decoded", n)
}
