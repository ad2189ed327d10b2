package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSigV4PublishedVectors computes, on requests received over real HTTP,
// the signatures AWS publishes: the SigV4 test suite's get-vanilla,
// post-vanilla and get-vanilla-query-order-key-case (credentials
// AKIDEXAMPLE, service "service", 20150830T123600Z), and the S3 reference's
// GET Object example (which signs x-amz-content-sha256 and range). The
// service is not "sqs" and the dates are old, so the canonical request,
// string to sign and key are checked without AuthenticateSigV4's scope and
// date checks (which the SDK-signed tests cover).
func TestSigV4PublishedVectors(t *testing.T) {
	t.Parallel()
	const (
		suiteSecret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
		suiteScope  = "AKIDEXAMPLE/20150830/us-east-1/service/aws4_request"
		suiteDate   = "20150830T123600Z"
		emptyHash   = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	)
	type vector struct {
		name, method, target, host, secret string
		headers                            map[string]string
		authz                              string
		signature                          string
	}
	vectors := []vector{{
		name: "get-vanilla", method: "GET", target: "/", host: "example.amazonaws.com", secret: suiteSecret,
		headers:   map[string]string{"X-Amz-Date": suiteDate},
		authz:     "AWS4-HMAC-SHA256 Credential=" + suiteScope + ", SignedHeaders=host;x-amz-date, Signature=",
		signature: "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
	}, {
		name: "post-vanilla", method: "POST", target: "/", host: "example.amazonaws.com", secret: suiteSecret,
		headers:   map[string]string{"X-Amz-Date": suiteDate},
		authz:     "AWS4-HMAC-SHA256 Credential=" + suiteScope + ", SignedHeaders=host;x-amz-date, Signature=",
		signature: "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
	}, {
		name: "get-vanilla-query-order-key-case", method: "GET", target: "/?Param2=value2&Param1=value1", host: "example.amazonaws.com", secret: suiteSecret,
		headers:   map[string]string{"X-Amz-Date": suiteDate},
		authz:     "AWS4-HMAC-SHA256 Credential=" + suiteScope + ", SignedHeaders=host;x-amz-date, Signature=",
		signature: "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
	}, {
		name: "s3-get-object", method: "GET", target: "/test.txt", host: "examplebucket.s3.amazonaws.com",
		secret: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		headers: map[string]string{
			"X-Amz-Date": "20130524T000000Z", "Range": "bytes=0-9", "X-Amz-Content-Sha256": emptyHash,
		},
		authz:     "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=",
		signature: "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
	}}

	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			got <- "read: " + err.Error()
			return
		}
		s, serr := parseAuthorization(r, r.Header.Get("Authorization"))
		if serr != nil {
			got <- "parse: " + serr.Error()
			return
		}
		payloads, perr := payloadHashes(r, body, false)
		if perr != nil {
			got <- "payload: " + perr.Error()
			return
		}
		mac := hmac.New(sha256.New, signingKey(r.Header.Get("X-Secret"), s.day, s.region, s.service))
		mac.Write([]byte(stringToSign(s, canonicalRequest(r, s, payloads[0].hash))))
		sig := mac.Sum(nil)
		if !hmac.Equal(sig, s.signature) {
			got <- "computed " + hex.EncodeToString(sig)
			return
		}
		got <- "ok"
	}))
	defer srv.Close()

	for _, v := range vectors {
		req, err := http.NewRequest(v.method, srv.URL+v.target, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = v.host
		for k, val := range v.headers {
			req.Header.Set(k, val)
		}
		// Not signed (not in SignedHeaders): how the handler learns the key.
		req.Header.Set("X-Secret", v.secret)
		req.Header.Set("Authorization", v.authz+v.signature)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if g := <-got; g != "ok" {
			t.Errorf("%s: %s, want the published signature %s", v.name, g, v.signature)
		}
	}
}

func TestSigV4Encoding(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                            "",
		"Param2=value2&Param1=value1": "Param1=value1&Param2=value2",
		"a=2&a=1&b":                   "a=1&a=2&b=",
		// Sorted after encoding: "a%2Fb" before "a-b".
		"k=a-b&k=a%2Fb":               "k=a%2Fb&k=a-b",
		"q=a+b&r=%7e%20~&s=%E2%82%AC": "q=a%20b&r=~%20~&s=%E2%82%AC",
		"X-Amz-Signature=ab&x=1":      "X-Amz-Signature=ab&x=1",
	} {
		if got := canonicalQuery(in, false); got != want {
			t.Errorf("canonicalQuery(%q) = %q, want %q", in, got, want)
		}
	}
	if got := canonicalQuery("X-Amz-Signature=ab&x=1", true); got != "x=1" {
		t.Errorf("presigned canonicalQuery keeps the signature: %q", got)
	}
	for in, want := range map[string]string{
		"  a   b  c ": "a b c",
		"a\tb":        "a\tb",
		"":            "",
	} {
		if got := collapseSpaces(in); got != want {
			t.Errorf("collapseSpaces(%q) = %q, want %q", in, got, want)
		}
	}
	if got := uriEncode("/000000000000/a b%2F~", false); got != "/000000000000/a%20b%252F~" {
		t.Errorf("uriEncode path: %q", got)
	}
	if got := uriEncode("a/b", true); !strings.EqualFold(got, "a%2Fb") {
		t.Errorf("uriEncode query: %q", got)
	}
}
