package auth_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/lmq-gateway/lmq-gateway/auth"
	"github.com/lmq-gateway/lmq-gateway/internal/route"
)

// sigV4Answer is what the test server answers: who signed, or why not.
type sigV4Answer struct {
	Who      string // the principal's namespace; "" when refused
	Operator bool
	Nil      bool // nil, nil: authentication is off
	Unsigned bool // the signature does not cover the body
	Code     string
	Message  string
	Status   int
}

// sigV4Server is a real HTTP server that authenticates each request with g
// at the time of its arrival.
func sigV4Server(t *testing.T, g *auth.Guard) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var a sigV4Answer
		res, err := g.AuthenticateSigV4(r, body, time.Now())
		var se *auth.SigV4Error
		switch {
		case errors.As(err, &se):
			a.Code, a.Message, a.Status = se.Code, se.Message, se.Status()
		case err != nil:
			a.Code = "unexpected error type: " + err.Error()
		case res == nil:
			a.Nil = true
		default:
			p := res.Principal
			a.Who, a.Operator, a.Unsigned = p.Namespace(), p.Token() == nil, res.UnsignedPayload
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func send(t *testing.T, srv *httptest.Server, req *http.Request) sigV4Answer {
	t.Helper()
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a sigV4Answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	return a
}

func hashHex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// sqsRequest is an SQS JSON 1.0 request as the SDK sends it, with body.
func sqsRequest(t *testing.T, srv *httptest.Server, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS.SendMessage")
	return req
}

// signSDK signs req with the AWS SDK's signer: the reference.
func signSDK(t *testing.T, req *http.Request, payloadHash, keyID, secret, service, region string, at time.Time) {
	t.Helper()
	creds := aws.Credentials{AccessKeyID: keyID, SecretAccessKey: secret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, payloadHash, service, region, at); err != nil {
		t.Fatal(err)
	}
}

func TestSigV4(t *testing.T) {
	t.Parallel()
	_, ts := startStore(t)
	ctx := t.Context()
	tok, info, err := ts.CreateToken(ctx, auth.TokenSpec{Name: "orders", Prefix: "orders.", Rights: []string{"push"}})
	if err != nil {
		t.Fatal(err)
	}
	keyID, secret, ok := auth.SigV4Credentials(tok)
	if !ok || keyID != info.ID {
		t.Fatalf("SigV4Credentials(%q) = %q, %q, %v", tok, keyID, secret, ok)
	}
	doomed, doomedInfo, err := ts.CreateToken(ctx, auth.TokenSpec{Name: "doomed", Rights: []string{"pull"}})
	if err != nil {
		t.Fatal(err)
	}
	doomedID, doomedSecret, _ := auth.SigV4Credentials(doomed)

	g := auth.NewGuard(auth.Credential{BearerToken: "op-token", BasicUser: "alice", BasicPassword: "pw"}, ts)
	srv := sigV4Server(t, g)
	const body = `{"QueueUrl":"http://h/000000000000/orders.a","MessageBody":"hi"}`
	now := time.Now()

	// signed is a JSON request signed by the SDK; tamper, when not nil,
	// changes it after signing.
	signed := func(keyID, secret, service, region string, at time.Time, tamper func(*http.Request)) *http.Request {
		req := sqsRequest(t, srv, body)
		signSDK(t, req, hashHex([]byte(body)), keyID, secret, service, region, at)
		if tamper != nil {
			tamper(req)
		}
		return req
	}
	type want struct {
		who      string // "" with code
		operator bool
		code     string
		message  string // a part of it
	}
	for _, c := range []struct {
		name string
		req  *http.Request
		want want
	}{
		{"token", signed(keyID, secret, "sqs", "us-east-1", now, nil), want{who: "orders"}},
		{"token, another region", signed(keyID, secret, "sqs", "eu-west-3", now, nil), want{who: "orders"}},
		{"token, 14 minutes old", signed(keyID, secret, "sqs", "us-east-1", now.Add(-14*time.Minute), nil), want{who: "orders"}},
		{"operator bearer", signed("lmq", "op-token", "sqs", "us-east-1", now, nil), want{who: "*", operator: true}},
		{"operator basic", signed("alice", "pw", "sqs", "us-east-1", now, nil), want{who: "*", operator: true}},
		{"token's own secret instead of its hash", signed(keyID, strings.SplitN(tok, ".", 2)[1], "sqs", "us-east-1", now, nil),
			want{code: auth.SigV4Mismatch, message: "does not match"}},
		{"wrong secret", signed(keyID, otherLastChar(secret), "sqs", "us-east-1", now, nil), want{code: auth.SigV4Mismatch}},
		{"operator bearer, wrong secret", signed("lmq", "op-tokem", "sqs", "us-east-1", now, nil), want{code: auth.SigV4Mismatch}},
		{"basic password under the bearer's id", signed("lmq", "pw", "sqs", "us-east-1", now, nil), want{code: auth.SigV4Mismatch}},
		{"unknown key", signed("0123456789abcdef", secret, "sqs", "us-east-1", now, nil), want{code: auth.SigV4UnknownKey}},
		{"unknown user", signed("bob", "pw", "sqs", "us-east-1", now, nil), want{code: auth.SigV4UnknownKey}},
		{"other service", signed(keyID, secret, "sns", "us-east-1", now, nil), want{code: auth.SigV4Mismatch, message: "service"}},
		{"expired", signed(keyID, secret, "sqs", "us-east-1", now.Add(-16*time.Minute), nil), want{code: auth.SigV4Mismatch, message: "Signature expired: "}},
		{"in the future", signed(keyID, secret, "sqs", "us-east-1", now.Add(16*time.Minute), nil), want{code: auth.SigV4Mismatch, message: "not yet current"}},
		{"tampered body", signed(keyID, secret, "sqs", "us-east-1", now, func(r *http.Request) {
			b := strings.Replace(body, `"hi"`, `"ho"`, 1)
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader(b)), int64(len(b))
		}), want{code: auth.SigV4Mismatch}},
		{"tampered signed header", signed(keyID, secret, "sqs", "us-east-1", now, func(r *http.Request) {
			r.Header.Set("X-Amz-Target", "AmazonSQS.DeleteQueue")
		}), want{code: auth.SigV4Mismatch}},
		{"tampered date", signed(keyID, secret, "sqs", "us-east-1", now, func(r *http.Request) {
			r.Header.Set("X-Amz-Date", now.Add(time.Second).UTC().Format("20060102T150405Z"))
		}), want{code: auth.SigV4Mismatch}},
		{"unsigned header added", signed(keyID, secret, "sqs", "us-east-1", now, func(r *http.Request) {
			r.Header.Set("X-Extra", "not signed, not checked")
		}), want{who: "orders"}},
		{"session token", signed(keyID, secret, "sqs", "us-east-1", now, func(r *http.Request) {
			r.Header.Set("X-Amz-Security-Token", "FwoGZXIvYXdzE")
		}), want{code: auth.SigV4UnknownKey}},
		{"unsigned", sqsRequest(t, srv, body), want{code: auth.SigV4Missing}},
		{"bearer instead of a signature", signed(keyID, secret, "sqs", "us-east-1", now, func(r *http.Request) {
			r.Header.Set("Authorization", "Bearer "+tok)
		}), want{code: auth.SigV4Incomplete}},
		{"no signature", signed(keyID, secret, "sqs", "us-east-1", now, func(r *http.Request) {
			a := r.Header.Get("Authorization")
			r.Header.Set("Authorization", a[:strings.Index(a, ", Signature=")])
		}), want{code: auth.SigV4Incomplete, message: "'Signature'"}},
		{"no date", signed(keyID, secret, "sqs", "us-east-1", now, func(r *http.Request) {
			r.Header.Del("X-Amz-Date")
		}), want{code: auth.SigV4Incomplete, message: "X-Amz-Date"}},
		{"short signature", signed(keyID, secret, "sqs", "us-east-1", now, func(r *http.Request) {
			r.Header.Set("Authorization", r.Header.Get("Authorization")[:len(r.Header.Get("Authorization"))-2])
		}), want{code: auth.SigV4Incomplete}},
	} {
		a := send(t, srv, c.req)
		switch {
		case a.Code != c.want.code || a.Who != c.want.who || a.Operator != c.want.operator || a.Nil:
			t.Errorf("%s: %+v, want %+v", c.name, a, c.want)
		case !strings.Contains(a.Message, c.want.message):
			t.Errorf("%s: message %q, want it to contain %q", c.name, a.Message, c.want.message)
		case a.Code == auth.SigV4Incomplete && a.Status != http.StatusBadRequest,
			a.Code != "" && a.Code != auth.SigV4Incomplete && a.Status != http.StatusForbidden:
			t.Errorf("%s: %s with status %d", c.name, a.Code, a.Status)
		}
	}

	// The token's rights and scope come with it.
	req := signed(keyID, secret, "sqs", "us-east-1", now, nil)
	res, err := g.AuthenticateSigV4(signedServerSide(t, req), []byte(body), now)
	if err != nil || res == nil {
		t.Fatalf("a token's signature: %+v, %v", res, err)
	}
	if p := res.Principal; p.Token() == nil || !p.Token().Allows(route.RightPush, "orders.a") || p.Token().Allows(route.RightPull, "orders.a") || p.Token().InScope("other") {
		t.Errorf("principal %+v: want the token's push on orders.*", p)
	}

	// A revoked token signs nothing.
	if a := send(t, srv, signed(doomedID, doomedSecret, "sqs", "us-east-1", now, nil)); a.Who != "doomed" {
		t.Fatalf("before revocation: %+v", a)
	}
	if err := ts.RevokeToken(ctx, doomedInfo.ID); err != nil {
		t.Fatal(err)
	}
	if a := send(t, srv, signed(doomedID, doomedSecret, "sqs", "us-east-1", now, nil)); a.Code != auth.SigV4UnknownKey {
		t.Errorf("revoked token: %+v, want %s", a, auth.SigV4UnknownKey)
	}
}

// signedServerSide is req as a handler sees it, for calling
// AuthenticateSigV4 directly: the host in r.Host.
func signedServerSide(t *testing.T, req *http.Request) *http.Request {
	t.Helper()
	r := req.Clone(context.Background())
	r.Host = req.URL.Host
	return r
}

// TestSigV4QueryProtocolAndPayload: the query protocol's form posts and GETs
// with awkward parameters, an unsigned payload and a payload hash header.
func TestSigV4QueryProtocolAndPayload(t *testing.T) {
	t.Parallel()
	g := auth.NewGuard(auth.Credential{BearerToken: "op"}, nil)
	srv := sigV4Server(t, g)
	now := time.Now()

	form := url.Values{"Action": {"SendMessage"}, "QueueUrl": {"http://h/000000000000/q"}, "MessageBody": {"a b+c/é~*"}}.Encode()
	post, err := http.NewRequest(http.MethodPost, srv.URL+"/", strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	signSDK(t, post, hashHex([]byte(form)), "lmq", "op", "sqs", "us-east-1", now)
	if a := send(t, srv, post); !a.Operator {
		t.Errorf("form post: %+v", a)
	}

	// A GET whose query needs encoding and sorting (repeated names, "/",
	// spaces, unicode) on a queue URL path.
	q := "Action=ReceiveMessage&AttributeName.2=b&AttributeName.1=All&MessageAttributeName.1=a%2Fb&MessageAttributeName.1=a-b&X=%E2%82%AC+x"
	get, err := http.NewRequest(http.MethodGet, srv.URL+"/000000000000/my-queue.fifo?"+q, nil)
	if err != nil {
		t.Fatal(err)
	}
	signSDK(t, get, hashHex(nil), "lmq", "op", "sqs", "us-east-1", now)
	if a := send(t, srv, get); !a.Operator {
		t.Errorf("GET with a query: %+v", a)
	}

	// X-Amz-Content-Sha256: UNSIGNED-PAYLOAD leaves the body out; a hash
	// must be the body's.
	const body = `{"QueueName":"q"}`
	unsigned := sqsRequest(t, srv, body)
	unsigned.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	signSDK(t, unsigned, "UNSIGNED-PAYLOAD", "lmq", "op", "sqs", "us-east-1", now)
	if a := send(t, srv, unsigned); !a.Operator || !a.Unsigned {
		t.Errorf("UNSIGNED-PAYLOAD: %+v", a)
	}
	hashed := sqsRequest(t, srv, body)
	hashed.Header.Set("X-Amz-Content-Sha256", hashHex([]byte(body)))
	signSDK(t, hashed, hashHex([]byte(body)), "lmq", "op", "sqs", "us-east-1", now)
	if a := send(t, srv, hashed); !a.Operator || a.Unsigned {
		t.Errorf("X-Amz-Content-Sha256: %+v", a)
	}
	lying := sqsRequest(t, srv, `{"QueueName":"r"}`)
	lying.Header.Set("X-Amz-Content-Sha256", hashHex([]byte(body)))
	signSDK(t, lying, hashHex([]byte(body)), "lmq", "op", "sqs", "us-east-1", now)
	if a := send(t, srv, lying); a.Code != auth.SigV4Mismatch || !strings.Contains(a.Message, "x-amz-content-sha256") {
		t.Errorf("X-Amz-Content-Sha256 of another body: %+v", a)
	}
}

// TestSigV4Presigned: the query form, as the SDK's presigner makes it.
func TestSigV4Presigned(t *testing.T) {
	t.Parallel()
	g := auth.NewGuard(auth.Credential{BasicUser: "alice", BasicPassword: "pw"}, nil)
	srv := sigV4Server(t, g)
	now := time.Now()
	presign := func(expires int, at time.Time) *http.Request {
		u := srv.URL + "/000000000000/q?Action=GetQueueAttributes&AttributeName.1=All&X-Amz-Expires=" + strconv.Itoa(expires)
		req, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		creds := aws.Credentials{AccessKeyID: "alice", SecretAccessKey: "pw"}
		signedURL, hdr, err := v4.NewSigner().PresignHTTP(context.Background(), creds, req, hashHex(nil), "sqs", "us-east-1", at)
		if err != nil {
			t.Fatal(err)
		}
		out, err := http.NewRequest(http.MethodGet, signedURL, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			if k != "Host" {
				out.Header[k] = v
			}
		}
		return out
	}
	if a := send(t, srv, presign(300, now)); !a.Operator || a.Unsigned {
		t.Errorf("presigned: %+v", a)
	}
	if a := send(t, srv, presign(60, now.Add(-2*time.Minute))); a.Code != auth.SigV4Mismatch || !strings.Contains(a.Message, "expired") {
		t.Errorf("presigned, past its X-Amz-Expires: %+v", a)
	}
	tampered := presign(300, now)
	tampered.URL.RawQuery = strings.Replace(tampered.URL.RawQuery, "AttributeName.1=All", "AttributeName.1=Policy", 1)
	if a := send(t, srv, tampered); a.Code != auth.SigV4Mismatch {
		t.Errorf("presigned, query changed: %+v", a)
	}
	both := presign(300, now)
	both.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=x")
	if a := send(t, srv, both); a.Code != auth.SigV4Incomplete {
		t.Errorf("presigned and an Authorization header: %+v", a)
	}
}

// TestSigV4AuthOff: without tokens or an operator credential anything goes,
// signed or not: nil, nil.
func TestSigV4AuthOff(t *testing.T) {
	t.Parallel()
	for _, g := range []*auth.Guard{nil, {}, auth.NewGuard(auth.Credential{}, nil)} {
		srv := sigV4Server(t, g)
		if a := send(t, srv, sqsRequest(t, srv, "{}")); !a.Nil || a.Code != "" {
			t.Errorf("unsigned, auth off: %+v", a)
		}
		req := sqsRequest(t, srv, "{}")
		signSDK(t, req, hashHex([]byte("{}")), "anything", "whatever", "sqs", "us-east-1", time.Now())
		if a := send(t, srv, req); !a.Nil || a.Code != "" {
			t.Errorf("signed with any key, auth off: %+v", a)
		}
	}
}

// otherLastChar is s with its last character changed: a secret that differs
// from s in one place, whatever s ends with (setting it to a fixed
// character left s unchanged one time in sixteen).
func otherLastChar(s string) string {
	last := byte('0')
	if s[len(s)-1] == last {
		last = '1'
	}
	return s[:len(s)-1] + string(last)
}
