package ops

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/lmq-gateway/lmq-gateway/auth"
)

// StatusClient asks a running gateway for its /stats, for the status command.
type StatusClient struct {
	// Base is the gateway's HTTP address: a URL ("https://host:9980") or
	// host:port (then http); an empty host means localhost.
	Base string
	// Auth is sent when the gateway requires it.
	Auth auth.Credential
	// Insecure skips TLS certificate verification.
	Insecure bool
}

// BaseURL turns an address as given to --http (or --http-listen) into a URL.
func BaseURL(addr string) string {
	if strings.Contains(addr, "://") {
		return strings.TrimRight(addr, "/")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// Fetch returns the gateway's /stats document; with brief, without the
// queues' event statistics (stats=false), all the status table needs.
func (c StatusClient) Fetch(ctx context.Context, brief bool) (*StatsDoc, error) {
	path := PathStats
	if brief {
		path += "?stats=false"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, BaseURL(c.Base)+path, nil)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	c.Auth.Set(req)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if c.Insecure {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // asked for by --insecure
	}
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("status: reading /stats: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status: %s answered %s: %s", req.URL, resp.Status, strings.TrimSpace(string(body)))
	}
	var doc StatsDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("status: parsing /stats: %w", err)
	}
	return &doc, nil
}

// PrintStatus prints what LMQ's lmq-admin status printed: the nodes, then per
// queue its messages, bytes and properties.
func PrintStatus(w io.Writer, doc *StatsDoc) error {
	fmt.Fprintf(w, "Active nodes: %s\n", joinOrNone(doc.ActiveNodes))
	fmt.Fprintf(w, "All nodes:    %s\n", joinOrNone(doc.AllNodes))
	if inactive := minus(doc.AllNodes, doc.ActiveNodes); len(inactive) > 0 {
		fmt.Fprintf(w, "Down:         %s\n", strings.Join(inactive, ", "))
	}
	fmt.Fprintln(w)
	names := make([]string, 0, len(doc.Queues))
	for n := range doc.Queues {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		_, err := fmt.Fprintln(w, "No queues.")
		return err
	}
	rows := [][]string{{"QUEUE", "MESSAGES", "BYTES", "PROPERTIES"}}
	for _, n := range names {
		q := doc.Queues[n]
		rows = append(rows, []string{n, strconv.FormatUint(q.Size, 10), strconv.FormatUint(q.Memory, 10), compactJSON(q.Props)})
	}
	var b strings.Builder
	writeTable(&b, rows)
	_, err := io.WriteString(w, b.String())
	return err
}

func joinOrNone(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}

func minus(a, b []string) []string {
	in := make(map[string]bool, len(b))
	for _, s := range b {
		in[s] = true
	}
	var out []string
	for _, s := range a {
		if !in[s] {
			out = append(out, s)
		}
	}
	return out
}

func compactJSON(b json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return string(b)
	}
	return buf.String()
}
