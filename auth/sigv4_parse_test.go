package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// The SigV4 parser on its own: what it reads from an Authorization header
// or a presigned query, and what it refuses (malformed parts, a wrong scope,
// a date out of range) before any key is looked up.

// parseNow is the clock of the parser's tests.
var parseNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const (
	parseStamp = "20260102T030405Z"
	parseSig   = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// parseAuthz is a well-formed Authorization header of key AKID, with
// credential scope scope ("<day>/<region>/<service>/<terminator>").
func parseAuthz(scope string) string {
	return "AWS4-HMAC-SHA256 Credential=AKID/" + scope + ", SignedHeaders=host;x-amz-date, Signature=" + parseSig
}

// parseQuery is a well-formed presigned query with X-Amz-Expires expires
// and X-Amz-Date stamp, changed by edit.
func parseQuery(stamp, expires string, edit func(url.Values)) string {
	q := url.Values{
		"Action":              {"ListQueues"},
		"X-Amz-Algorithm":     {"AWS4-HMAC-SHA256"},
		"X-Amz-Credential":    {"AKID/" + stamp[:8] + "/us-east-1/sqs/aws4_request"},
		"X-Amz-Date":          {stamp},
		"X-Amz-Expires":       {expires},
		"X-Amz-SignedHeaders": {"host"},
		"X-Amz-Signature":     {parseSig},
	}
	if edit != nil {
		edit(q)
	}
	return q.Encode()
}

// parseRequest is a request as the server hands it over: Host set, the
// query raw, headers as given ("" values left out).
func parseRequest(authz, rawQuery string, hdr map[string]string) *http.Request {
	r := &http.Request{Method: http.MethodGet, Host: "sqs.example:9324", URL: &url.URL{Path: "/", RawQuery: rawQuery}, Header: http.Header{}}
	if authz != "" {
		r.Header.Set("Authorization", authz)
	}
	for k, v := range hdr {
		if v != "" {
			r.Header.Set(k, v)
		}
	}
	return r
}

func stampAt(d time.Duration) string { return parseNow.Add(d).Format(sigV4TimeFormat) }

func TestParseSigV4(t *testing.T) {
	t.Parallel()
	scope := "20260102/us-east-1/sqs/aws4_request"
	amzDate := map[string]string{"X-Amz-Date": parseStamp}
	withAuthz := func(authz string) *http.Request { return parseRequest(authz, "", amzDate) }
	presigned := func(stamp, expires string, edit func(url.Values)) *http.Request {
		return parseRequest("", parseQuery(stamp, expires, edit), nil)
	}
	del := func(k string) func(url.Values) { return func(q url.Values) { q.Del(k) } }
	set := func(k, v string) func(url.Values) { return func(q url.Values) { q.Set(k, v) } }
	type want struct {
		code string // "" for parsed
		msg  string // in the message
		// parsed: key id, region, signed headers, presigned and expires.
		key, region string
		headers     []string
		presigned   bool
		expires     time.Duration
	}
	ok := want{key: "AKID", region: "us-east-1", headers: []string{"host", "x-amz-date"}}
	okPresigned := want{key: "AKID", region: "us-east-1", headers: []string{"host"}, presigned: true, expires: 300 * time.Second}
	for _, c := range []struct {
		name string
		req  *http.Request
		want want
	}{
		// The Authorization header.
		{"header", withAuthz(parseAuthz(scope)), ok},
		{"header without spaces after commas", withAuthz(strings.ReplaceAll(parseAuthz(scope), ", ", ",")), ok},
		{"header with surrounding space", withAuthz("  " + parseAuthz(scope) + "  "), ok},
		{"key id with a slash", withAuthz(strings.Replace(parseAuthz("20260102/eu-west-3/sqs/aws4_request"), "AKID", "team/user", 1)),
			want{key: "team/user", region: "eu-west-3", headers: []string{"host", "x-amz-date"}}},
		{"Date instead of X-Amz-Date", parseRequest(parseAuthz(scope), "", map[string]string{"Date": "Fri, 02 Jan 2026 03:04:05 GMT"}), ok},
		{"no signature at all", parseRequest("", "Action=ListQueues", nil), want{code: SigV4Missing}},
		{"another scheme", withAuthz("Bearer abc"), want{code: SigV4Incomplete, msg: "AWS4-HMAC-SHA256"}},
		{"SigV2", withAuthz("AWS AKID:c2lnbmF0dXJl"), want{code: SigV4Incomplete}},
		{"algorithm alone", withAuthz("AWS4-HMAC-SHA256"), want{code: SigV4Incomplete}},
		{"another algorithm", withAuthz(strings.Replace(parseAuthz(scope), "AWS4-HMAC-SHA256", "AWS4-ECDSA-P256-SHA256", 1)), want{code: SigV4Incomplete}},
		{"no Signature", withAuthz("AWS4-HMAC-SHA256 Credential=AKID/" + scope + ", SignedHeaders=host"), want{code: SigV4Incomplete, msg: "'Signature'"}},
		{"no Credential", withAuthz("AWS4-HMAC-SHA256 SignedHeaders=host, Signature=" + parseSig), want{code: SigV4Incomplete, msg: "'Credential'"}},
		{"a component without =", withAuthz(parseAuthz(scope) + ", junk"), want{code: SigV4Incomplete, msg: "key=value"}},
		{"an unknown component", withAuthz(parseAuthz(scope) + ", Foo=bar"), want{code: SigV4Incomplete, msg: "unknown component"}},
		{"Credential twice", withAuthz(parseAuthz(scope) + ", Credential=AKID/" + scope), want{code: SigV4Incomplete, msg: "twice"}},
		{"empty components", withAuthz("AWS4-HMAC-SHA256 ,,,"), want{code: SigV4Incomplete}},
		{"short signature", withAuthz(parseAuthz(scope)[:len(parseAuthz(scope))-2]), want{code: SigV4Incomplete, msg: "hexadecimal"}},
		{"signature not hex", withAuthz(strings.Replace(parseAuthz(scope), parseSig, strings.Repeat("zz", 32), 1)), want{code: SigV4Incomplete, msg: "hexadecimal"}},
		{"SignedHeaders empty", withAuthz(strings.Replace(parseAuthz(scope), "host;x-amz-date", "", 1)), want{code: SigV4Incomplete}},
		{"SignedHeaders in upper case", withAuthz(strings.Replace(parseAuthz(scope), "host;x-amz-date", "Host;x-amz-date", 1)), want{code: SigV4Incomplete}},
		{"SignedHeaders twice the same", withAuthz(strings.Replace(parseAuthz(scope), "host;x-amz-date", "host;host", 1)), want{code: SigV4Incomplete}},
		{"SignedHeaders with an empty name", withAuthz(strings.Replace(parseAuthz(scope), "host;x-amz-date", "host;;x-amz-date", 1)), want{code: SigV4Incomplete}},
		{"Host not signed", withAuthz(strings.Replace(parseAuthz(scope), "host;x-amz-date", "x-amz-date", 1)), want{code: SigV4Incomplete, msg: "'Host'"}},
		{"no date", parseRequest(parseAuthz(scope), "", nil), want{code: SigV4Incomplete, msg: "'X-Amz-Date' or a 'Date'"}},
		{"X-Amz-Date extended", parseRequest(parseAuthz(scope), "", map[string]string{"X-Amz-Date": "2026-01-02T03:04:05Z"}), want{code: SigV4Incomplete, msg: "ISO8601"}},
		{"Date not an HTTP date", parseRequest(parseAuthz(scope), "", map[string]string{"Date": "yesterday"}), want{code: SigV4Incomplete}},
		{"header and presigned query", parseRequest(parseAuthz(scope), parseQuery(parseStamp, "300", nil), amzDate), want{code: SigV4Incomplete, msg: "Only one auth mechanism"}},

		// The credential scope.
		{"credential of four parts", withAuthz(parseAuthz("20260102/us-east-1/sqs")), want{code: SigV4Incomplete, msg: "Credential must have the form"}},
		{"credential without key id", withAuthz(strings.Replace(parseAuthz(scope), "AKID/", "/", 1)), want{code: SigV4Incomplete}},
		{"credential day of 7 digits", withAuthz(parseAuthz("2026012/us-east-1/sqs/aws4_request")), want{code: SigV4Incomplete, msg: "yyyyMMdd"}},
		{"credential day not a date", withAuthz(parseAuthz("20261302/us-east-1/sqs/aws4_request")), want{code: SigV4Incomplete, msg: "yyyyMMdd"}},
		{"credential of another day", withAuthz(parseAuthz("20260101/us-east-1/sqs/aws4_request")), want{code: SigV4Mismatch, msg: "Date in Credential scope"}},
		{"no region", withAuthz(parseAuthz("20260102//sqs/aws4_request")), want{code: SigV4Mismatch, msg: "valid region"}},
		{"another service", withAuthz(parseAuthz("20260102/us-east-1/s3/aws4_request")), want{code: SigV4Mismatch, msg: "correct service"}},
		{"service in upper case", withAuthz(parseAuthz("20260102/us-east-1/SQS/aws4_request")), want{code: SigV4Mismatch, msg: "correct service"}},
		{"another terminator", withAuthz(parseAuthz("20260102/us-east-1/sqs/aws4_requests")), want{code: SigV4Mismatch, msg: "terminator"}},

		// The date of a header signature: 15 minutes either way.
		{"14 minutes old", parseRequest(parseAuthz(scope), "", map[string]string{"X-Amz-Date": stampAt(-14 * time.Minute)}), ok},
		{"16 minutes old", parseRequest(parseAuthz(scope), "", map[string]string{"X-Amz-Date": stampAt(-16 * time.Minute)}), want{code: SigV4Mismatch, msg: "Signature expired"}},
		{"14 minutes ahead", parseRequest(parseAuthz(scope), "", map[string]string{"X-Amz-Date": stampAt(14 * time.Minute)}), ok},
		{"16 minutes ahead", parseRequest(parseAuthz(scope), "", map[string]string{"X-Amz-Date": stampAt(16 * time.Minute)}), want{code: SigV4Mismatch, msg: "not yet current"}},

		// The presigned query.
		{"presigned", presigned(parseStamp, "300", nil), okPresigned},
		{"presigned for 7 days", presigned(parseStamp, "604800", nil), want{key: "AKID", region: "us-east-1", headers: []string{"host"}, presigned: true, expires: 7 * 24 * time.Hour}},
		{"X-Amz-Algorithm alone", parseRequest("", "X-Amz-Algorithm=AWS4-HMAC-SHA256", nil), want{code: SigV4Incomplete}},
		{"no X-Amz-Algorithm", presigned(parseStamp, "300", del("X-Amz-Algorithm")), want{code: SigV4Incomplete, msg: "X-Amz-Algorithm"}},
		{"no X-Amz-Credential", presigned(parseStamp, "300", del("X-Amz-Credential")), want{code: SigV4Incomplete, msg: "X-Amz-Credential"}},
		{"no X-Amz-Date", presigned(parseStamp, "300", del("X-Amz-Date")), want{code: SigV4Incomplete, msg: "X-Amz-Date"}},
		{"no X-Amz-Expires", presigned(parseStamp, "300", del("X-Amz-Expires")), want{code: SigV4Incomplete, msg: "X-Amz-Expires"}},
		{"no X-Amz-SignedHeaders", presigned(parseStamp, "300", del("X-Amz-SignedHeaders")), want{code: SigV4Incomplete, msg: "X-Amz-SignedHeaders"}},
		{"no X-Amz-Signature", presigned(parseStamp, "300", del("X-Amz-Signature")), want{code: SigV4Incomplete, msg: "X-Amz-Signature"}},
		{"two X-Amz-Signature", presigned(parseStamp, "300", func(q url.Values) { q.Add("X-Amz-Signature", parseSig) }), want{code: SigV4Incomplete, msg: "exactly one"}},
		{"another X-Amz-Algorithm", presigned(parseStamp, "300", set("X-Amz-Algorithm", "AWS4-HMAC-SHA1")), want{code: SigV4Incomplete}},
		{"X-Amz-Expires 0", presigned(parseStamp, "0", nil), want{code: SigV4Incomplete, msg: "X-Amz-Expires"}},
		{"X-Amz-Expires negative", presigned(parseStamp, "-1", nil), want{code: SigV4Incomplete, msg: "X-Amz-Expires"}},
		{"X-Amz-Expires beyond 7 days", presigned(parseStamp, "604801", nil), want{code: SigV4Incomplete, msg: "X-Amz-Expires"}},
		{"X-Amz-Expires not a number", presigned(parseStamp, "5m", nil), want{code: SigV4Incomplete, msg: "X-Amz-Expires"}},
		{"X-Amz-Expires overflowing", presigned(parseStamp, "99999999999999999999999", nil), want{code: SigV4Incomplete, msg: "X-Amz-Expires"}},
		{"presigned X-Amz-Date extended", presigned(parseStamp, "300", set("X-Amz-Date", "2026-01-02T03:04:05Z")), want{code: SigV4Incomplete, msg: "ISO8601"}},
		{"presigned, Host not signed", presigned(parseStamp, "300", set("X-Amz-SignedHeaders", "x-amz-date")), want{code: SigV4Incomplete, msg: "'Host'"}},
		{"presigned for another service", presigned(parseStamp, "300", set("X-Amz-Credential", "AKID/20260102/us-east-1/s3/aws4_request")), want{code: SigV4Mismatch, msg: "correct service"}},

		// A presigned URL's life: its X-Amz-Expires, not 15 minutes.
		{"presigned 299 s ago for 300 s", presigned(stampAt(-299*time.Second), "300", nil), okPresigned},
		{"presigned 301 s ago for 300 s", presigned(stampAt(-301*time.Second), "300", nil), want{code: SigV4Mismatch, msg: "Signature expired"}},
		{"presigned 20 minutes ago for an hour", presigned(stampAt(-20*time.Minute), "3600", nil),
			want{key: "AKID", region: "us-east-1", headers: []string{"host"}, presigned: true, expires: time.Hour}},
		{"presigned 6 days ago for 7", presigned(stampAt(-6*24*time.Hour), "604800", nil),
			want{key: "AKID", region: "us-east-1", headers: []string{"host"}, presigned: true, expires: 7 * 24 * time.Hour}},
		{"presigned 16 minutes ahead", presigned(stampAt(16*time.Minute), "3600", nil), want{code: SigV4Mismatch, msg: "not yet current"}},
	} {
		s, err := parseSigV4(c.req, parseNow)
		if c.want.code != "" {
			switch {
			case err == nil:
				t.Errorf("%s: parsed %+v, want %s", c.name, s, c.want.code)
			case err.Code != c.want.code || !strings.Contains(err.Message, c.want.msg):
				t.Errorf("%s: %s %q, want %s with %q", c.name, err.Code, err.Message, c.want.code, c.want.msg)
			case (err.Code == SigV4Incomplete) != (err.Status() == http.StatusBadRequest):
				t.Errorf("%s: %s answered %d", c.name, err.Code, err.Status())
			}
			continue
		}
		switch {
		case err != nil:
			t.Errorf("%s: %v, want it parsed", c.name, err)
		case s.keyID != c.want.key || s.region != c.want.region || s.service != "sqs" || s.terminator != sigV4Terminator ||
			!slices.Equal(s.signedHeaders, c.want.headers) || s.presigned != c.want.presigned || s.expires != c.want.expires || len(s.signature) != 32:
			t.Errorf("%s: parsed %+v, want %+v", c.name, s, c.want)
		case s.stamp[:8] != s.day:
			t.Errorf("%s: stamp %s of another day than %s", c.name, s.stamp, s.day)
		}
	}
}

// TestPayloadHashes: the last lines of the canonical request a signature
// may be over, and whether each covers the body.
func TestPayloadHashes(t *testing.T) {
	t.Parallel()
	const body = "Action=PurgeQueue"
	bodyHash := "1a4d6b9a4dcd8ba8e7c3fba8d2c0d5b4a6d5b2f8f8e6e0c5e1c7b0f5a9c3d2e1" // not body's
	for _, c := range []struct {
		name      string
		header    string
		presigned bool
		want      []payloadLine
		code      string
	}{
		{"header signature", "", false, []payloadLine{{hashOf(body), true}}, ""},
		{"presigned: the body's hash, or UNSIGNED-PAYLOAD", "", true, []payloadLine{{hashOf(body), true}, {unsignedPayload, false}}, ""},
		{"UNSIGNED-PAYLOAD", unsignedPayload, false, []payloadLine{{unsignedPayload, false}}, ""},
		{"presigned with UNSIGNED-PAYLOAD", unsignedPayload, true, []payloadLine{{unsignedPayload, false}}, ""},
		{"the body's hash", hashOf(body), true, []payloadLine{{hashOf(body), true}}, ""},
		{"the body's hash in upper case", strings.ToUpper(hashOf(body)), false, []payloadLine{{strings.ToUpper(hashOf(body)), true}}, ""},
		{"another body's hash", bodyHash, false, nil, SigV4Mismatch},
		{"streaming", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", false, nil, SigV4Incomplete},
		{"garbage", "x", true, nil, SigV4Incomplete},
	} {
		r := parseRequest("", "", map[string]string{"X-Amz-Content-Sha256": c.header})
		got, err := payloadHashes(r, []byte(body), c.presigned)
		switch {
		case c.code != "" && (err == nil || err.Code != c.code):
			t.Errorf("%s: %v %v, want %s", c.name, got, err, c.code)
		case c.code == "" && (err != nil || !slices.Equal(got, c.want)):
			t.Errorf("%s: %v %v, want %v", c.name, got, err, c.want)
		}
	}
}

func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
