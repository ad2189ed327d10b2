package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/lmq-gateway/lmq-gateway/internal/flaghelp"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// namesMain is the `lmq-gateway names QUEUE...` command: it prints the NATS
// names of each queue (stream, subjects, consumer, KV key), or with --json
// one JSON object per queue.
func namesMain(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("lmq-gateway names", flag.ContinueOnError)
	fs.SetOutput(out)
	asJSON := fs.Bool("json", false, "print JSON objects instead of text")
	fs.Usage = func() {
		fmt.Fprint(out, "Usage: lmq-gateway names [--json] QUEUE...\n\nPrints the JetStream stream, subjects and consumer of each queue, for NATS programs.\n\n"+connectHint("LMQ_<enc>")+"\n")
		flaghelp.PrintDefaults(fs, out)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("no queue name given")
	}
	for i, q := range fs.Args() {
		n, err := mapping.NativeNames(q)
		if err != nil {
			return fmt.Errorf("queue %q: %w", q, err)
		}
		if *asJSON {
			b, err := json.Marshal(n)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%s\n", b)
			continue
		}
		if i > 0 {
			fmt.Fprintln(out)
		}
		fmt.Fprint(out, n.Text())
		if i == fs.NArg()-1 {
			fmt.Fprint(out, "\n"+connectHint(n.Stream))
		}
	}
	return nil
}

// connectHint says how a NATS tool reaches the gateway's NATS, with an
// example about stream.
func connectHint(stream string) string {
	return `NATS programs connect to the gateway's embedded server with the URL and
credentials it keeps in its data directory (mode 0600), or to --nats-url:
  nats --server "$(cat DATA-DIR/nats-client.url)" stream info ` + stream + "\n"
}
