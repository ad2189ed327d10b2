package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/route"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// Tokens (beyond LMQ, after lmstfy's namespaces): bearer credentials scoped
// to a set of queues, with rights. They live in the KV bucket TokensBucket,
// one key per token, with only the SHA-256 of the secret stored; every
// gateway watches the bucket, so a token created or revoked through one
// gateway works or stops working on all of them as soon as the change
// reaches them (normally well within a second).
//
// A token reads "<id>.<secret>": the id (16 hex digits, not secret) finds the
// record, the secret (256 random bits, base64url) is checked against its hash
// in constant time. Authenticate works from the watched copy in memory: no
// JetStream round trip per request.

const (
	// TokensBucket is the KV bucket of the tokens.
	TokensBucket = "LMQ_TOKENS"
	// MaxTokens bounds the tokens a gateway holds (and so the per-namespace
	// metrics): CreateToken refuses more, and records beyond it in the bucket
	// are ignored with a warning.
	MaxTokens = 10000
	// MaxTokenRegexp bounds a scope's regular expression, in bytes.
	MaxTokenRegexp = 1024
	// maxTokenRecord bounds a record read back from the bucket: it is input.
	maxTokenRecord = 8 << 10

	tokenKeyPrefix = "t."
	tokenIDLen     = 16 // hex digits of 8 random bytes
)

// ParseRights reads rights by name ("push", "pull", "admin").
func ParseRights(names []string) (route.Right, error) {
	var r route.Right
	for _, s := range names {
		one, ok := route.RightNamed(s)
		if !ok {
			return 0, fmt.Errorf("%w: unknown right %q (want push, pull or admin)", gateway.ErrInvalid, s)
		}
		r |= one
	}
	return r, nil
}

// TokenSpec describes a token to create.
type TokenSpec struct {
	// Name is the token's namespace: it labels the per-namespace metrics and
	// tells tokens apart in a listing. 1 to 64 of A-Z a-z 0-9 _ . -; several
	// tokens may share one (a producer's and a consumer's, say).
	Name string `json:"name"`
	// Prefix limits the scope to the queues whose names start with it.
	Prefix string `json:"prefix,omitempty"`
	// Regexp limits the scope to the queues whose whole name it matches
	// (RE2, anchored at both ends). At most one of Prefix and Regexp; with
	// neither the scope is every queue.
	Regexp string `json:"regexp,omitempty"`
	// Rights: "push", "pull", "admin".
	Rights []string `json:"rights"`
}

// TokenInfo is a token as listed: everything but its secret.
type TokenInfo struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Prefix  string    `json:"prefix,omitempty"`
	Regexp  string    `json:"regexp,omitempty"`
	Rights  []string  `json:"rights"`
	Created time.Time `json:"created"`
}

// tokenRecord is a token as stored in the bucket.
type tokenRecord struct {
	TokenInfo
	// Hash is the hex SHA-256 of the secret.
	Hash string `json:"sha256"`
}

// Token is an authenticated token: what it may do, to which queues. It is
// immutable.
type Token struct {
	info   TokenInfo
	rights route.Right
	re     *regexp.Regexp // nil: Prefix scopes
	hash   [sha256.Size]byte
}

// Info describes the token (no secret).
func (t *Token) Info() TokenInfo { return t.info }

// Name is the token's namespace.
func (t *Token) Name() string { return t.info.Name }

// Rights are the token's rights.
func (t *Token) Rights() route.Right { return t.rights }

// Has reports whether the token has right r on some queue.
func (t *Token) Has(r route.Right) bool { return t.rights&r == r }

// Global reports whether the token's scope is every queue.
func (t *Token) Global() bool { return t.re == nil && t.info.Prefix == "" }

// InScope reports whether queue is in the token's scope.
func (t *Token) InScope(queue string) bool {
	if t.re != nil {
		return t.re.MatchString(queue)
	}
	return strings.HasPrefix(queue, t.info.Prefix)
}

// Scope is the token's queue scope as the core takes it: nil when it is
// every queue.
func (t *Token) Scope() gateway.Scope {
	if t.Global() {
		return nil
	}
	return t.InScope
}

// Allows reports whether the token has right r on queue.
func (t *Token) Allows(r route.Right, queue string) bool { return t.Has(r) && t.InScope(queue) }

var tokenNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// compileToken checks a record (a new one, or one read from the bucket).
func compileToken(rec tokenRecord) (*Token, error) {
	if !tokenNameRE.MatchString(rec.Name) {
		return nil, fmt.Errorf("%w: token name must be 1 to 64 of A-Z a-z 0-9 _ . -", gateway.ErrInvalid)
	}
	if rec.Prefix != "" && rec.Regexp != "" {
		return nil, fmt.Errorf("%w: a token's scope is a prefix or a regexp, not both", gateway.ErrInvalid)
	}
	if err := mapping.ValidateQueueName(rec.Prefix); rec.Prefix != "" && err != nil {
		return nil, fmt.Errorf("prefix: %w: %w", gateway.ErrInvalid, err)
	}
	if len(rec.Regexp) > MaxTokenRegexp {
		return nil, fmt.Errorf("%w: regexp longer than %d bytes", gateway.ErrInvalid, MaxTokenRegexp)
	}
	r, err := ParseRights(rec.Rights)
	if err != nil {
		return nil, err
	}
	if r == 0 {
		return nil, fmt.Errorf("%w: a token needs at least one right (push, pull, admin)", gateway.ErrInvalid)
	}
	t := &Token{rights: r}
	if rec.Regexp != "" {
		expr := `^(?:` + rec.Regexp + `)$`
		if t.re, err = regexp.Compile(expr); err != nil {
			return nil, fmt.Errorf("%w: regexp: %w", gateway.ErrInvalid, err)
		}
		// A short expression may still compile to a large program
		// ("(x{1000}){1000}" is refused by the parser, "[a-z]{1000}" is
		// not); every gateway keeps every token's in memory.
		if n := progSize(expr); n > maxTokenProg {
			return nil, fmt.Errorf("%w: regexp too complex (%d instructions, at most %d)", gateway.ErrInvalid, n, maxTokenProg)
		}
	}
	if rec.Hash != "" {
		h, err := hex.DecodeString(rec.Hash)
		if err != nil || len(h) != sha256.Size {
			return nil, errors.New("malformed secret hash")
		}
		copy(t.hash[:], h)
	}
	rec.Rights = r.Names() // canonical order, no duplicates
	t.info = rec.TokenInfo
	return t, nil
}

// maxTokenProg bounds the compiled program of a scope's regexp.
const maxTokenProg = 2000

// progSize is the number of instructions expr (which compiles) compiles to.
func progSize(expr string) int {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return 0
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0
	}
	return len(prog.Inst)
}

// Store is this gateway's view of the token bucket. Create it with Open.
type Store struct {
	log *slog.Logger

	mu   sync.RWMutex
	byID map[string]*Token
	// b is the bucket, followed by the core for the gateway's lifetime; own
	// writes are noted there, so that a late echo of a token's creation
	// cannot bring it back after this gateway revoked it.
	b *gateway.SharedBucket
}

// Buckets opens a KV bucket shared by every gateway and mirrors it in
// memory; *gateway.Gateway has it. It is all the store needs of the core.
type Buckets interface {
	OpenSharedBucket(ctx context.Context, name, description string,
		apply func(kv.Entry), replayed func(present map[string]bool)) (*gateway.SharedBucket, error)
}

var _ Buckets = (*gateway.Gateway)(nil)

// Open opens (creating it the first time) the token bucket through core,
// loads it and follows it until the core closes. ctx bounds the load. Call
// it before serving, not concurrently with the core's Close.
func Open(ctx context.Context, core Buckets, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.Default()
	}
	t := &Store{log: log, byID: make(map[string]*Token)}
	// A gateway must not go on accepting tokens whose revocation it no
	// longer hears about: the follower replaces a watch that ends.
	b, err := core.OpenSharedBucket(ctx, TokensBucket, "lmq-gateway access tokens (SHA-256 of the secrets)", t.apply, t.replayed)
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	t.b = b
	return t, nil
}

// replayed forgets cached tokens the bucket no longer has.
func (t *Store) replayed(present map[string]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id := range t.byID {
		if !present[tokenKeyPrefix+id] {
			delete(t.byID, id)
		}
	}
}

func (t *Store) apply(e kv.Entry) {
	id, ok := strings.CutPrefix(e.Key, tokenKeyPrefix)
	if !ok {
		return
	}
	if e.Op != kv.OpPut {
		t.set(id, nil)
		return
	}
	tok, err := parseTokenRecord(id, e.Value)
	if err != nil {
		t.set(id, nil)
		t.log.Warn("ignoring invalid token in KV", "id", id, "err", err)
		return
	}
	if !t.set(id, tok) {
		t.log.Warn("ignoring token beyond the limit", "id", id, "limit", MaxTokens)
	}
}

func parseTokenRecord(id string, b []byte) (*Token, error) {
	if len(b) > maxTokenRecord {
		return nil, fmt.Errorf("record of %d bytes, beyond %d", len(b), maxTokenRecord)
	}
	var rec tokenRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, err
	}
	if rec.ID != id || !validTokenID(id) {
		return nil, errors.New("id does not match its key")
	}
	if rec.Hash == "" {
		return nil, errors.New("no secret hash")
	}
	return compileToken(rec)
}

// set installs (tok != nil) or forgets a token; false when the cache is full.
func (t *Store) set(id string, tok *Token) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tok == nil {
		delete(t.byID, id)
		return true
	}
	if _, ok := t.byID[id]; !ok && len(t.byID) >= MaxTokens {
		return false
	}
	t.byID[id] = tok
	return true
}

func validTokenID(id string) bool {
	if len(id) != tokenIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// CreateToken stores a new token and returns it ("<id>.<secret>": the only
// time the secret is shown) with its description.
func (t *Store) CreateToken(ctx context.Context, spec TokenSpec) (string, TokenInfo, error) {
	rec := tokenRecord{TokenInfo: TokenInfo{
		Name: spec.Name, Prefix: spec.Prefix, Regexp: spec.Regexp, Rights: spec.Rights,
		Created: time.Now().UTC().Truncate(time.Second),
	}}
	if _, err := compileToken(rec); err != nil {
		return "", TokenInfo{}, err
	}
	if t.Len() >= MaxTokens {
		return "", TokenInfo{}, fmt.Errorf("%w: %d tokens exist, the limit", gateway.ErrInvalid, MaxTokens)
	}
	var idb [tokenIDLen / 2]byte
	var secret [32]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return "", TokenInfo{}, fmt.Errorf("token id: %w", err)
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return "", TokenInfo{}, fmt.Errorf("token secret: %w", err)
	}
	rec.ID = hex.EncodeToString(idb[:])
	sec := base64.RawURLEncoding.EncodeToString(secret[:])
	h := sha256.Sum256([]byte(sec))
	rec.Hash = hex.EncodeToString(h[:])
	tok, err := compileToken(rec)
	if err != nil {
		return "", TokenInfo{}, err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return "", TokenInfo{}, fmt.Errorf("encode token: %w", err)
	}
	rev, err := t.b.KV().Create(ctx, tokenKeyPrefix+rec.ID, b)
	if err != nil {
		return "", TokenInfo{}, storeErr("store token", err)
	}
	t.b.Wrote(tokenKeyPrefix+rec.ID, rev)
	// Seen at once by this gateway's clients; the watch brings it too.
	t.set(rec.ID, tok)
	return rec.ID + "." + sec, tok.info, nil
}

// ListTokens describes every token, by name then id; no secrets.
func (t *Store) ListTokens(context.Context) []TokenInfo {
	t.mu.RLock()
	out := make([]TokenInfo, 0, len(t.byID))
	for _, tok := range t.byID {
		out = append(out, tok.info)
	}
	t.mu.RUnlock()
	slices.SortFunc(out, func(a, b TokenInfo) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Token describes the token with this id.
func (t *Store) Token(id string) (TokenInfo, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	tok, ok := t.byID[id]
	if !ok {
		return TokenInfo{}, false
	}
	return tok.info, true
}

// Len is the number of tokens.
func (t *Store) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.byID)
}

// RevokeToken deletes the token with this id (ErrNotFound when there is
// none); every gateway stops accepting it when the deletion reaches it.
func (t *Store) RevokeToken(ctx context.Context, id string) error {
	if !validTokenID(id) {
		return fmt.Errorf("token %q: %w", id, gateway.ErrNotFound)
	}
	bkt := t.b.KV()
	if _, err := bkt.Get(ctx, tokenKeyPrefix+id); err != nil {
		if errors.Is(err, kv.ErrKeyNotFound) {
			t.set(id, nil)
			return fmt.Errorf("token %q: %w", id, gateway.ErrNotFound)
		}
		return storeErr("read token", err)
	}
	// Purge, not Delete: nothing of the token stays in the bucket.
	done := t.b.Removing(tokenKeyPrefix + id)
	err := bkt.Purge(ctx, tokenKeyPrefix+id)
	done(ctx, err == nil)
	if err != nil {
		return storeErr("revoke token", err)
	}
	t.set(id, nil)
	return nil
}

// Authenticate returns the token that tok ("<id>.<secret>") is, from the
// copy in memory; false when it is malformed, unknown or revoked, or its
// secret is wrong. The secret's hash is compared in constant time.
func (t *Store) Authenticate(tok string) (*Token, bool) {
	id, sec, ok := strings.Cut(tok, ".")
	if !ok || !validTokenID(id) {
		return nil, false
	}
	t.mu.RLock()
	rec := t.byID[id]
	t.mu.RUnlock()
	if rec == nil {
		return nil, false
	}
	h := sha256.Sum256([]byte(sec))
	if subtle.ConstantTimeCompare(h[:], rec.hash[:]) != 1 {
		return nil, false
	}
	return rec, true
}

// storeErr is a failure of the bucket, as the core reports its own: the
// client's cancellation as itself, anything else as gateway.ErrUnavailable
// (the endpoints answer 503: try again).
func storeErr(op string, err error) error {
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w: %w", op, gateway.ErrUnavailable, err)
}
