package auth

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// FuzzParseSigV4 feeds the SigV4 parser outside bytes: an Authorization
// header, a query (presigned or not), X-Amz-Date, Date and
// X-Amz-Content-Sha256 headers. Whatever they are, the parser answers with
// one of SQS's codes and its status, or a signature whose every part was
// checked (the scope's service and terminator, a day that is the date's,
// Host signed, 32 bytes of signature, the date in range); the canonical
// request can be built from what it accepted; and nothing the fuzzer makes
// authenticates against a real key.
func FuzzParseSigV4(f *testing.F) {
	scope := "20260102/us-east-1/sqs/aws4_request"
	good := parseAuthz(scope)
	for _, s := range []struct{ authz, query, amzDate, date, sha string }{
		{good, "", parseStamp, "", ""},
		{good, "Action=ListQueues&QueueUrl=%2F000000000000%2Fq", parseStamp, "", "UNSIGNED-PAYLOAD"},
		{"", parseQuery(parseStamp, "300", nil), "", "", ""},
		{"", parseQuery(parseStamp, "604800", nil), "", "", ""},
		{"", parseQuery(stampAt(-20*time.Minute), "3600", nil), "", "", ""},
		{good, parseQuery(parseStamp, "300", nil), parseStamp, "", ""},
		{"", "", "", "", ""},
		{"AWS4-HMAC-SHA256", "", "", "", ""},
		{"AWS4-HMAC-SHA256 ,,,,", "", parseStamp, "", ""},
		{"AWS4-HMAC-SHA256 Credential=////, SignedHeaders=;, Signature=", "", parseStamp, "", ""},
		{"AWS4-HMAC-SHA256 Credential=/////////20260102/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=" + parseSig, "", parseStamp, "", ""},
		{"AWS4-HMAC-SHA256 Credential=a\x00b/" + scope + ", SignedHeaders=host, Signature=" + parseSig, "", parseStamp, "", ""},
		{"AWS4-HMAC-SHA256 Credential=é/" + scope + ", SignedHeaders=host;Ü, Signature=" + parseSig, "", parseStamp, "", ""},
		{good + ", Credential=x", "", parseStamp, "", ""},
		{good, "", "", "Fri, 02 Jan 2026 03:04:05 GMT", ""},
		{good, "", "", "Mon, 01 Jan 0001 00:00:00 GMT", ""},
		{good, "", "00000101T000000Z", "", ""},
		{good, "", "99991231T235959Z", "", ""},
		{good, "", "2026010T030405Z", "", ""},
		{good, "", parseStamp, "", strings.Repeat("A", 64)},
		{"", "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=99999999999999999999&X-Amz-Date=" + parseStamp, "", "", ""},
		{"", "X-Amz-Signature=%zz&X-Amz-Credential=%", "", "", ""},
		{"", "X-Amz-Credential=a%2F20260102%2F%2Fsqs%2Faws4_request&X-Amz-Credential=b", "", "", ""},
		{"", parseQuery(parseStamp, "300", func(q url.Values) { q.Set("X-Amz-Signature", strings.Repeat("0", 63)) }), "", "", ""},
		{"", parseQuery(parseStamp, "300", func(q url.Values) { q.Set("X-Amz-Security-Token", "t") }), "", "", ""},
		{strings.Repeat("AWS4-HMAC-SHA256 Credential=", 100), strings.Repeat("&&==", 100), "", "", ""},
	} {
		f.Add(s.authz, s.query, s.amzDate, s.date, s.sha)
	}
	g := NewGuard(Credential{BearerToken: "operator-secret", BasicUser: "AKID", BasicPassword: "pw"}, nil)
	f.Fuzz(func(t *testing.T, authz, query, amzDate, date, sha string) {
		r := parseRequest(authz, query, map[string]string{"X-Amz-Date": amzDate, "Date": date, "X-Amz-Content-Sha256": sha})
		s, err := parseSigV4(r, parseNow)
		if err != nil {
			switch err.Code {
			case SigV4Missing, SigV4Mismatch, SigV4Incomplete:
			default:
				t.Fatalf("code %q: %v", err.Code, err)
			}
			if st := err.Status(); st != http.StatusBadRequest && st != http.StatusForbidden || err.Message == "" {
				t.Fatalf("status %d, message %q", st, err.Message)
			}
		} else {
			switch {
			case s.keyID == "" || s.region == "" || s.service != sigV4Service || s.terminator != sigV4Terminator:
				t.Fatalf("scope not checked: %+v", s)
			case len(s.day) != 8 || len(s.stamp) < 8 || s.stamp[:8] != s.day:
				t.Fatalf("day %q of stamp %q", s.day, s.stamp)
			case !slices.Contains(s.signedHeaders, "host") || len(s.signature) != 32:
				t.Fatalf("signed headers %q, signature of %d bytes", s.signedHeaders, len(s.signature))
			case s.date.After(parseNow.Add(sigV4Skew)):
				t.Fatalf("date %v ahead", s.date)
			case !s.presigned && s.date.Before(parseNow.Add(-sigV4Skew)):
				t.Fatalf("header signature of %v", s.date)
			case s.presigned && (s.expires < time.Second || s.expires > sigV4MaxExpires*time.Second || parseNow.After(s.date.Add(s.expires))):
				t.Fatalf("presigned at %v for %v", s.date, s.expires)
			}
			// The canonical request and string to sign of what was accepted.
			for _, p := range []string{unsignedPayload, hashOf("")} {
				if sts := stringToSign(s, canonicalRequest(r, s, p)); !strings.HasPrefix(sts, sigV4Algorithm+"\n"+s.stamp+"\n") {
					t.Fatalf("string to sign %q", sts)
				}
			}
		}
		// Against real keys (the operator's, under "lmq" and "AKID"), nothing
		// made up authenticates, and every refusal is a *SigV4Error.
		res, aerr := g.AuthenticateSigV4(r, []byte("Action=ListQueues"), parseNow)
		if aerr == nil {
			t.Fatalf("authenticated %+v", res)
		}
		if _, ok := aerr.(*SigV4Error); !ok {
			t.Fatalf("refusal %T %v", aerr, aerr)
		}
	})
}
