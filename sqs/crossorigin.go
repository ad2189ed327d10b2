package sqs

import (
	"net/http"
	"net/url"

	"github.com/lmq-gateway/lmq-gateway/internal/route"
)

// Requests a browser makes. Without authentication (the SQS port's
// default) any request may do anything, and a browser will send one to the
// port for any page it shows: the query protocol works over GET, so an
// <img src="http://127.0.0.1:9324/?Action=PurgeQueue&QueueUrl=jobs"> on a
// page of any site empties a queue, and binding to loopback does not help,
// since the browser runs on that machine. SDKs, the AWS CLI and curl send
// none of the headers below and are not concerned; what is refused is an
// action that changes state (any but GetQueueUrl, ListQueues,
// GetQueueAttributes, ListDeadLetterSourceQueues, ListQueueTags; a
// ReceiveMessage changes state, it puts messages in flight), judged by the
// action rather than the method, answered 403 AccessDenied, nothing done:
//
//   - from a page of another origin, by the HTTP port's rule (net/http's
//     CrossOriginProtection, with its trusted --allowed-origins):
//     Sec-Fetch-Site cross-site or same-site (another port of the same host
//     is same-site), or, without Sec-Fetch-Site (browsers before 2023), an
//     Origin naming another host than the request's Host, or, with neither
//     (older browsers still, which send no Origin on a GET), a Referer of
//     another host;
//   - made by the browser on its own rather than by a script: Sec-Fetch-Mode
//     other than cors or same-origin (navigate: a link, a form, a typed or
//     bookmarked URL, a redirect; no-cors: an image, a script, a style
//     sheet) or Sec-Fetch-Dest other than empty, whatever the site. A
//     script of a trusted origin calls the API with fetch (mode cors,
//     destination empty), signing it when authentication is on; a link
//     opened from a mail or chat program (Sec-Fetch-Site none) is exactly the
//     attack on a loopback port, and a presigned URL for an action that
//     changes state has no business in an address bar either.

// browserCheck returns why a state-changing action is refused to r, nil
// when it may be served.
func (s *Server) browserCheck(r *http.Request) *apiError {
	h := r.Header
	// The HTTP port's rule, applied whatever the method: a probe carrying
	// r's Host and browser headers as a POST. The Referer stands in for the
	// Origin only when the browser sent neither Origin nor Sec-Fetch-Site.
	probe := &http.Request{Method: http.MethodPost, Host: r.Host, URL: r.URL, Header: http.Header{}}
	site, origin := h.Get("Sec-Fetch-Site"), h.Get("Origin")
	if site != "" {
		probe.Header.Set("Sec-Fetch-Site", site)
	}
	if origin == "" && site == "" {
		origin = refererOrigin(h.Get("Referer"))
	}
	if origin != "" {
		probe.Header.Set("Origin", origin)
	}
	if err := s.opts.CrossOrigin.Check(probe); err != nil {
		return errorf(http.StatusForbidden, "AccessDenied",
			"cross-origin request refused: %v; a browser page of another origin may not change anything on the SQS port (the gateway's --allowed-origins names origins that may)", err)
	}
	mode, dest := h.Get("Sec-Fetch-Mode"), h.Get("Sec-Fetch-Dest")
	if (mode != "" && mode != "cors" && mode != "same-origin") || (dest != "" && dest != "empty") {
		return errorf(http.StatusForbidden, "AccessDenied",
			"request refused: the browser made it on its own (Sec-Fetch-Mode %q, Sec-Fetch-Dest %q), for a link, a form, an image or a typed URL; SQS actions that change anything are served to SDKs, the AWS CLI, curl and scripts (fetch), not to those", mode, dest)
	}
	return nil
}

// refererOrigin is the origin ("scheme://host[:port]") of a Referer, ""
// when it names none (absent, relative or unreadable: nothing to judge by).
func refererOrigin(ref string) string {
	if ref == "" {
		return ""
	}
	u, err := url.Parse(ref)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// changesState reports whether the action changes anything: every action
// but those any right may do, which only read (route.AnyRight). A
// ReceiveMessage needs the pull right: it puts messages in flight.
func (a action) changesState() bool { return a.right != route.AnyRight }
