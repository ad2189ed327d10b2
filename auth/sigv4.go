package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// AWS Signature Version 4, for the SQS front end: SQS clients (the SDKs,
// the AWS CLI) sign every request with an access key id and a secret access
// key; they cannot send a bearer token. The gateway's credentials map onto
// AWS keys (see AuthenticateSigV4) and the signature is checked the way AWS
// checks it, so that an SDK configured with such a key works unchanged.

// The SQS error codes of a refused signature (Amazon SQS API reference,
// "Common Errors").
const (
	// SigV4Missing: the request carries no signature at all.
	SigV4Missing = "MissingAuthenticationToken"
	// SigV4Incomplete: the signature is malformed (400).
	SigV4Incomplete = "IncompleteSignature"
	// SigV4UnknownKey: no such access key id, or a session token (403).
	SigV4UnknownKey = "InvalidClientTokenId"
	// SigV4Mismatch: the signature is wrong, out of date or of another
	// scope (403). SQS answers an expired signature with this code too
	// ("Signature expired: ..."), not RequestExpired.
	SigV4Mismatch = "SignatureDoesNotMatch"
)

const (
	sigV4Algorithm  = "AWS4-HMAC-SHA256"
	sigV4Service    = "sqs"
	sigV4Terminator = "aws4_request"
	// sigV4Skew is how far the request's date may be from now: SQS's 15
	// minutes, both ways.
	sigV4Skew = 15 * time.Minute
	// sigV4MaxExpires bounds a presigned request's X-Amz-Expires (7 days,
	// as AWS).
	sigV4MaxExpires = 7 * 24 * 3600
	sigV4TimeFormat = "20060102T150405Z"
	sigV4DayFormat  = "20060102"
	// unsignedPayload in X-Amz-Content-Sha256: the body is not covered by
	// the signature.
	unsignedPayload = "UNSIGNED-PAYLOAD"
	// sigV4OperatorKeyID is the access key id of the operator's bearer
	// token (--auth-token): the token itself is the secret.
	sigV4OperatorKeyID = "lmq"
)

// SigV4Error is a refused AWS Signature Version 4 request: Code is the SQS
// error code (one of the SigV4 constants), Message its text.
type SigV4Error struct{ Code, Message string }

func (e *SigV4Error) Error() string { return e.Code + ": " + e.Message }

// Status is the HTTP status SQS answers the error with.
func (e *SigV4Error) Status() int {
	if e.Code == SigV4Incomplete {
		return http.StatusBadRequest
	}
	return http.StatusForbidden
}

func sigV4Err(code, format string, args ...any) *SigV4Error {
	return &SigV4Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// SigV4Credentials is the AWS access key id and secret access key of a
// token ("<id>.<secret>"); false when it is malformed. The secret access key
// is the lowercase hex SHA-256 of the secret, which is what the store holds,
// so every token has one without a change to the bucket.
func SigV4Credentials(token string) (accessKeyID, secretAccessKey string, ok bool) {
	id, sec, ok := strings.Cut(token, ".")
	if !ok || !validTokenID(id) || sec == "" {
		return "", "", false
	}
	h := sha256.Sum256([]byte(sec))
	return id, hex.EncodeToString(h[:]), true
}

// sigV4Candidate is a secret an access key id may sign with, and who
// signing with it is.
type sigV4Candidate struct {
	secret string
	who    *Principal
}

// sigV4Candidates are the secrets of access key id: the operator's (the
// bearer token under "lmq", the basic password under the basic user) and
// the token's with that id. More than one only when the operator chose a
// basic user name that is also a key id.
func (g *Guard) sigV4Candidates(keyID string) []sigV4Candidate {
	var out []sigV4Candidate
	if g.operator.BearerToken != "" && keyID == sigV4OperatorKeyID {
		out = append(out, sigV4Candidate{g.operator.BearerToken, &Principal{}})
	}
	if g.operator.BasicUser != "" && keyID == g.operator.BasicUser {
		out = append(out, sigV4Candidate{g.operator.BasicPassword, &Principal{}})
	}
	if g.tokens != nil && validTokenID(keyID) {
		g.tokens.mu.RLock()
		t := g.tokens.byID[keyID]
		g.tokens.mu.RUnlock()
		if t != nil {
			out = append(out, sigV4Candidate{hex.EncodeToString(t.hash[:]), &Principal{tok: t}})
		}
	}
	return out
}

// sigV4Request is the signature a request carries, parsed.
type sigV4Request struct {
	keyID, day, region, service, terminator string
	signedHeaders                           []string
	signature                               []byte
	// date is the request's time; stamp is it as the string to sign has it.
	date  time.Time
	stamp string
	// presigned: the signature is in the query (X-Amz-Signature), and
	// expires is its X-Amz-Expires.
	presigned bool
	expires   time.Duration
}

// SigV4Result is what a valid signature says about its request.
type SigV4Result struct {
	// Principal is who signed it.
	Principal *Principal
	// UnsignedPayload: the signature does not cover the request's body
	// (X-Amz-Content-Sha256: UNSIGNED-PAYLOAD, or a presigned URL signed
	// with UNSIGNED-PAYLOAD). Whoever holds the signature may send it with
	// any body, so nothing in the body may be taken as signed.
	UnsignedPayload bool
}

// AuthenticateSigV4 checks r's AWS Signature Version 4 and returns who
// signed it and what the signature covers. body is r's body, already read
// (and bounded) by the caller; now is the time to check the request's date
// against. It returns nil, nil when authentication is off (a zero Guard, or
// neither tokens nor an operator credential): the SQS API then accepts any
// credentials, signed or not. Otherwise a refusal is a *SigV4Error whose
// Code is SQS's.
//
// Credentials, as AWS access key id / secret access key:
//   - a token "<id>.<secret>": the token's id (16 hex digits) / the
//     lowercase hex SHA-256 of its secret part (SigV4Credentials; POST
//     /tokens answers both). That hash is exactly what the bucket
//     LMQ_TOKENS stores, so the bucket now holds signing keys: whoever can
//     read it in NATS can sign SQS requests as any token (they could read
//     every queue through NATS already). The token's rights and scope apply.
//   - --auth-token T: "lmq" / T; --auth-basic user:pw: user / pw. Every
//     right on every queue.
//
// The signature is the header form (Authorization: AWS4-HMAC-SHA256
// Credential=<key id>/<yyyymmdd>/<region>/sqs/aws4_request,
// SignedHeaders=..., Signature=...) with X-Amz-Date (or Date), or the
// presigned query form (X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date,
// X-Amz-Expires, X-Amz-SignedHeaders, X-Amz-Signature). Any region; the
// service must be "sqs"; the date within 15 minutes of now, or for a
// presigned request, at most 15 minutes ahead and not past its
// X-Amz-Expires.
//
// The payload hash (the canonical request's last line) is the request's
// X-Amz-Content-Sha256 header when it has one (UNSIGNED-PAYLOAD leaves the
// body unsigned; a hex hash must be the body's), else the SHA-256 of body.
// A presigned request without that header may also be signed over
// UNSIGNED-PAYLOAD: AWS's services other than S3 take the body's hash here
// (what botocore's and the Go SDK's presigners sign for SQS, the hash of
// the empty body), but S3-style presigners sign every URL with
// UNSIGNED-PAYLOAD, and accepting it costs nothing, since the result then
// says the body is unsigned. A session token (X-Amz-Security-Token) is
// refused: the gateway issues none.
func (g *Guard) AuthenticateSigV4(r *http.Request, body []byte, now time.Time) (*SigV4Result, error) {
	if g == nil || !g.Enabled() {
		return nil, nil
	}
	s, err := parseSigV4(r, now)
	if err != nil {
		return nil, err
	}
	if r.Header.Get("X-Amz-Security-Token") != "" || (s.presigned && r.URL.Query().Get("X-Amz-Security-Token") != "") {
		return nil, sigV4Err(SigV4UnknownKey, "The security token included in the request is invalid.")
	}
	cands := g.sigV4Candidates(s.keyID)
	if len(cands) == 0 {
		return nil, sigV4Err(SigV4UnknownKey, "The security token included in the request is invalid.")
	}
	payloads, perr := payloadHashes(r, body, s.presigned)
	if perr != nil {
		return nil, perr
	}
	keys := make([][]byte, len(cands))
	for i, c := range cands {
		keys[i] = signingKey(c.secret, s.day, s.region, s.service)
	}
	for _, p := range payloads {
		sts := stringToSign(s, canonicalRequest(r, s, p.hash))
		for i, c := range cands {
			mac := hmac.New(sha256.New, keys[i])
			mac.Write([]byte(sts))
			if hmac.Equal(mac.Sum(nil), s.signature) {
				return &SigV4Result{Principal: c.who, UnsignedPayload: !p.signed}, nil
			}
		}
	}
	return nil, sigV4Err(SigV4Mismatch, "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
}

// parseSigV4 reads the signature of r (header or presigned form) and
// checks what needs no key: the algorithm, the scope and the date.
func parseSigV4(r *http.Request, now time.Time) (*sigV4Request, *SigV4Error) {
	authz := r.Header.Get("Authorization")
	q := r.URL.Query()
	var s *sigV4Request
	var err *SigV4Error
	switch {
	case authz != "" && q.Has("X-Amz-Signature"):
		return nil, sigV4Err(SigV4Incomplete, "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter or the Authorization header should be specified")
	case authz != "":
		s, err = parseAuthorization(r, authz)
	case q.Has("X-Amz-Signature") || q.Has("X-Amz-Algorithm") || q.Has("X-Amz-Credential"):
		s, err = parsePresigned(q)
	default:
		return nil, sigV4Err(SigV4Missing, "The request must contain either a valid (registered) AWS access key ID or X.509 certificate.")
	}
	if err != nil {
		return nil, err
	}
	if s.day != s.stamp[:8] {
		return nil, sigV4Err(SigV4Mismatch, "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '%s' != '%s', from '%s'.", s.day, s.stamp[:8], s.stamp)
	}
	if s.region == "" {
		return nil, sigV4Err(SigV4Mismatch, "Credential should be scoped to a valid region.")
	}
	if s.service != sigV4Service {
		return nil, sigV4Err(SigV4Mismatch, "Credential should be scoped to correct service: '%s'.", sigV4Service)
	}
	if s.terminator != sigV4Terminator {
		return nil, sigV4Err(SigV4Mismatch, "Credential should be scoped with a valid terminator: '%s', not '%s'.", sigV4Terminator, s.terminator)
	}
	if !slices.Contains(s.signedHeaders, "host") {
		return nil, sigV4Err(SigV4Incomplete, "'Host' must be a 'SignedHeader' in the AWS Authorization.")
	}
	// SQS's wording, which clients and people recognize from AWS. A
	// presigned URL is valid until its X-Amz-Expires (up to 7 days: that is
	// what it is for), a header signature for 15 minutes; neither may be
	// dated more than 15 minutes ahead.
	now = now.UTC()
	stamp := func(t time.Time) string { return t.UTC().Format(sigV4TimeFormat) }
	if !s.presigned && s.date.Before(now.Add(-sigV4Skew)) {
		return nil, sigV4Err(SigV4Mismatch, "Signature expired: %s is now earlier than %s (%s - 15 min.)", s.stamp, stamp(now.Add(-sigV4Skew)), stamp(now))
	}
	if s.date.After(now.Add(sigV4Skew)) {
		return nil, sigV4Err(SigV4Mismatch, "Signature not yet current: %s is still later than %s (%s + 15 min.)", s.stamp, stamp(now.Add(sigV4Skew)), stamp(now))
	}
	if s.presigned && now.After(s.date.Add(s.expires)) {
		return nil, sigV4Err(SigV4Mismatch, "Signature expired: %s is now earlier than %s (%s - %d sec.)", s.stamp, stamp(now.Add(-s.expires)), stamp(now), int64(s.expires/time.Second))
	}
	return s, nil
}

// parseAuthorization reads "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=...,
// Signature=..." and the request's date.
func parseAuthorization(r *http.Request, authz string) (*sigV4Request, *SigV4Error) {
	alg, rest, _ := strings.Cut(strings.TrimSpace(authz), " ")
	if alg != sigV4Algorithm {
		return nil, sigV4Err(SigV4Incomplete, "Unsupported authorization type: only %s is accepted", sigV4Algorithm)
	}
	var cred, signed, sig string
	var seen [3]bool
	for part := range strings.SplitSeq(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, sigV4Err(SigV4Incomplete, "Authorization header requires each component in the form key=value: %q", strings.TrimSpace(part))
		}
		var dst *string
		var i int
		switch k {
		case "Credential":
			dst, i = &cred, 0
		case "SignedHeaders":
			dst, i = &signed, 1
		case "Signature":
			dst, i = &sig, 2
		default:
			return nil, sigV4Err(SigV4Incomplete, "Authorization header has an unknown component %q", k)
		}
		if seen[i] {
			return nil, sigV4Err(SigV4Incomplete, "Authorization header has %q twice", k)
		}
		seen[i], *dst = true, v
	}
	for i, name := range []string{"Credential", "SignedHeaders", "Signature"} {
		if !seen[i] {
			return nil, sigV4Err(SigV4Incomplete, "Authorization header requires '%s' parameter.", name)
		}
	}
	s := &sigV4Request{}
	if err := s.setCredential(cred); err != nil {
		return nil, err
	}
	if err := s.setSignedHeaders(signed); err != nil {
		return nil, err
	}
	if err := s.setSignature(sig); err != nil {
		return nil, err
	}
	if v := r.Header.Get("X-Amz-Date"); v != "" {
		t, err := time.Parse(sigV4TimeFormat, v)
		if err != nil {
			return nil, sigV4Err(SigV4Incomplete, "X-Amz-Date must be in ISO8601 basic format (yyyyMMdd'T'HHmmss'Z'): %q", v)
		}
		s.date, s.stamp = t, v
	} else if v := r.Header.Get("Date"); v != "" {
		t, err := http.ParseTime(v)
		if err != nil {
			return nil, sigV4Err(SigV4Incomplete, "Date header is not an HTTP date: %q", v)
		}
		// The string to sign has the date in ISO 8601 basic format whichever
		// header carried it.
		s.date, s.stamp = t.UTC(), t.UTC().Format(sigV4TimeFormat)
	} else {
		return nil, sigV4Err(SigV4Incomplete, "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
	}
	return s, nil
}

// parsePresigned reads the query form of the signature.
func parsePresigned(q url.Values) (*sigV4Request, *SigV4Error) {
	for _, k := range []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature"} {
		if len(q[k]) != 1 {
			return nil, sigV4Err(SigV4Incomplete, "A presigned request requires exactly one '%s' query parameter.", k)
		}
	}
	if alg := q.Get("X-Amz-Algorithm"); alg != sigV4Algorithm {
		return nil, sigV4Err(SigV4Incomplete, "Unsupported X-Amz-Algorithm %q: only %s is accepted", alg, sigV4Algorithm)
	}
	s := &sigV4Request{presigned: true}
	if err := s.setCredential(q.Get("X-Amz-Credential")); err != nil {
		return nil, err
	}
	if err := s.setSignedHeaders(q.Get("X-Amz-SignedHeaders")); err != nil {
		return nil, err
	}
	if err := s.setSignature(q.Get("X-Amz-Signature")); err != nil {
		return nil, err
	}
	v := q.Get("X-Amz-Date")
	t, err := time.Parse(sigV4TimeFormat, v)
	if err != nil {
		return nil, sigV4Err(SigV4Incomplete, "X-Amz-Date must be in ISO8601 basic format (yyyyMMdd'T'HHmmss'Z'): %q", v)
	}
	s.date, s.stamp = t, v
	n, err := strconv.Atoi(q.Get("X-Amz-Expires"))
	if err != nil || n < 1 || n > sigV4MaxExpires {
		return nil, sigV4Err(SigV4Incomplete, "X-Amz-Expires must be a number of seconds from 1 to %d.", sigV4MaxExpires)
	}
	s.expires = time.Duration(n) * time.Second
	return s, nil
}

// setCredential reads "<key id>/<yyyymmdd>/<region>/<service>/aws4_request".
// The scope is taken from the right, so that a basic user name with a "/"
// still works as a key id.
func (s *sigV4Request) setCredential(v string) *SigV4Error {
	parts := strings.Split(v, "/")
	if len(parts) < 5 || parts[0] == "" {
		return sigV4Err(SigV4Incomplete, "Credential must have the form <access key id>/<date>/<region>/<service>/aws4_request: %q", v)
	}
	n := len(parts)
	s.keyID = strings.Join(parts[:n-4], "/")
	s.day, s.region, s.service, s.terminator = parts[n-4], parts[n-3], parts[n-2], parts[n-1]
	if _, err := time.Parse(sigV4DayFormat, s.day); err != nil || len(s.day) != 8 {
		return sigV4Err(SigV4Incomplete, "Credential's date must be yyyyMMdd: %q", s.day)
	}
	return nil
}

// setSignedHeaders reads "host;x-amz-date;...": lowercase names, each once.
func (s *sigV4Request) setSignedHeaders(v string) *SigV4Error {
	if v == "" {
		return sigV4Err(SigV4Incomplete, "SignedHeaders is empty.")
	}
	s.signedHeaders = strings.Split(v, ";")
	for i, h := range s.signedHeaders {
		if h == "" || h != strings.ToLower(h) || slices.Contains(s.signedHeaders[:i], h) {
			return sigV4Err(SigV4Incomplete, "SignedHeaders must be distinct lowercase header names separated by ';': %q", v)
		}
	}
	return nil
}

func (s *sigV4Request) setSignature(v string) *SigV4Error {
	b, err := hex.DecodeString(v)
	if err != nil || len(b) != sha256.Size {
		return sigV4Err(SigV4Incomplete, "Signature must be %d hexadecimal digits.", 2*sha256.Size)
	}
	s.signature = b
	return nil
}

// payloadLine is a last line of the canonical request a signature may be
// over, and whether it covers the body.
type payloadLine struct {
	hash   string
	signed bool
}

// payloadHashes are the last lines of the canonical request r's signature
// may be over (see AuthenticateSigV4), the body's hash first.
func payloadHashes(r *http.Request, body []byte, presigned bool) ([]payloadLine, *SigV4Error) {
	sum := sha256.Sum256(body)
	computed := hex.EncodeToString(sum[:])
	v := r.Header.Get("X-Amz-Content-Sha256")
	switch {
	case v == "" && presigned:
		return []payloadLine{{computed, true}, {unsignedPayload, false}}, nil
	case v == "":
		return []payloadLine{{computed, true}}, nil
	case v == unsignedPayload:
		return []payloadLine{{v, false}}, nil
	case len(v) == 2*sha256.Size:
		// The header is signed, the body is not: a body that is not the one
		// the header names would otherwise pass.
		if !hmac.Equal([]byte(strings.ToLower(v)), []byte(computed)) {
			return nil, sigV4Err(SigV4Mismatch, "The provided 'x-amz-content-sha256' header does not match what was computed.")
		}
		return []payloadLine{{v, true}}, nil
	}
	return nil, sigV4Err(SigV4Incomplete, "Unsupported x-amz-content-sha256 %q: a hex SHA-256 or UNSIGNED-PAYLOAD.", v)
}

// canonicalRequest is AWS's canonical form of r: method, URI, query,
// signed headers, their names, payload hash, one a line.
func canonicalRequest(r *http.Request, s *sigV4Request, payload string) string {
	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte('\n')
	b.WriteString(canonicalURI(r.URL))
	b.WriteByte('\n')
	b.WriteString(canonicalQuery(r.URL.RawQuery, s.presigned))
	b.WriteByte('\n')
	for _, h := range s.signedHeaders {
		b.WriteString(h)
		b.WriteByte(':')
		b.WriteString(canonicalHeaderValue(r, h))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(strings.Join(s.signedHeaders, ";"))
	b.WriteByte('\n')
	b.WriteString(payload)
	return b.String()
}

// canonicalURI is the path as sent (already percent-encoded), encoded once
// more: for every service but S3, AWS encodes each path segment twice. The
// path is not normalized, as the SDKs do not normalize it when signing.
func canonicalURI(u *url.URL) string {
	p := u.EscapedPath()
	if p == "" {
		return "/"
	}
	return uriEncode(p, false)
}

// canonicalQuery is the query's parameters (without X-Amz-Signature when
// presigned), each name and value decoded then URI-encoded, sorted by name
// then value after encoding, as AWS specifies. A "+" reads as a space, as
// the SDKs read it when signing.
func canonicalQuery(raw string, presigned bool) string {
	if raw == "" {
		return ""
	}
	type param struct{ k, v string }
	var ps []param
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		// An undecodable name or value is signed as sent: it cannot match
		// what a signer computed from decoded parameters either way.
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		if dv, err := url.QueryUnescape(v); err == nil {
			v = dv
		}
		if presigned && k == "X-Amz-Signature" {
			continue
		}
		ps = append(ps, param{uriEncode(k, true), uriEncode(v, true)})
	}
	slices.SortFunc(ps, func(a, b param) int {
		if c := strings.Compare(a.k, b.k); c != 0 {
			return c
		}
		return strings.Compare(a.v, b.v)
	})
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String()
}

// canonicalHeaderValue is header name's values in r, each trimmed with inner
// runs of spaces made one, joined by ",". The Go server moves Host and
// Content-Length out of the header map: they are taken from r.
func canonicalHeaderValue(r *http.Request, name string) string {
	if name == "host" {
		return collapseSpaces(r.Host)
	}
	vs := r.Header.Values(name)
	if len(vs) == 0 && name == "content-length" && r.ContentLength >= 0 {
		return strconv.FormatInt(r.ContentLength, 10)
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = collapseSpaces(v)
	}
	return strings.Join(out, ",")
}

// collapseSpaces trims v and makes each run of spaces inside it one space.
func collapseSpaces(v string) string {
	v = strings.Trim(v, " \t")
	if !strings.Contains(v, "  ") {
		return v
	}
	var b strings.Builder
	b.Grow(len(v))
	space := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == ' ' {
			if space {
				continue
			}
			space = true
		} else {
			space = false
		}
		b.WriteByte(c)
	}
	return b.String()
}

// uriEncode percent-encodes every byte of s but the unreserved characters
// (A-Z a-z 0-9 - _ . ~), in uppercase hex; "/" too when slash.
func uriEncode(s string, slash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == '~', c == '/' && !slash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}

// stringToSign is the algorithm, the date, the credential scope and the
// hash of the canonical request, one a line.
func stringToSign(s *sigV4Request, canonical string) string {
	h := sha256.Sum256([]byte(canonical))
	return sigV4Algorithm + "\n" + s.stamp + "\n" +
		s.day + "/" + s.region + "/" + s.service + "/" + s.terminator + "\n" +
		hex.EncodeToString(h[:])
}

// signingKey derives the key of a day, region and service from a secret
// access key, as AWS specifies.
func signingKey(secret, day, region, service string) []byte {
	k := []byte("AWS4" + secret)
	for _, part := range []string{day, region, service, sigV4Terminator} {
		mac := hmac.New(sha256.New, k)
		mac.Write([]byte(part))
		k = mac.Sum(nil)
	}
	return k
}
