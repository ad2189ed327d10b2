package ops

import "github.com/prometheus/client_golang/prometheus"

// authMetrics count requests per namespace (a token's name; "*" for the
// operator's credential) and right. Their series are bounded by the tokens'
// names (auth.MaxTokens in package auth) times the four rights and two outcomes.
type authMetrics struct {
	requests *prometheus.CounterVec
	failures prometheus.Counter
}

func newAuthMetrics(reg *prometheus.Registry, o *Ops) *authMetrics {
	m := &authMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lmq_namespace_requests_total",
			Help: "Authenticated HTTP requests by namespace (the token's name, \"*\" for the operator's --auth-token/--auth-basic), the right the route needs (push, pull, admin, read: any right, none) and whether it was allowed (a 403 when not).",
		}, []string{"namespace", "right", "allowed"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lmq_auth_failures_total",
			Help: "HTTP requests answered 401: no credential, a wrong one, or a revoked or unknown token.",
		}),
	}
	reg.MustRegister(m.requests, m.failures)
	if o.opt.Tokens != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lmq_tokens",
			Help: "Tokens this gateway knows (from the LMQ_TOKENS bucket).",
		}, func() float64 { return float64(o.opt.Tokens.Len()) }))
	}
	return m
}
