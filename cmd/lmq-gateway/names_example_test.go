package main

import (
	"fmt"
	"os"
)

func Example_names() {
	if err := namesMain([]string{"lmq/foo"}, os.Stdout); err != nil {
		fmt.Println(err)
	}
	// Output:
	// queue:          "lmq/foo"
	// encoded:        dhmn2br6dtng
	// shard:          34
	// stream:         LMQS_34
	// subject:        lmq.q.34.dhmn2br6dtng
	// parts-subject:  lmq.a.34.dhmn2br6dtng
	// delay-subjects: lmq.s.34.dhmn2br6dtng.*
	// dead-subject:   lmq.d.34.dhmn2br6dtng
	// priority-subjects: lmq.p.34.dhmn2br6dtng.*
	// consumer:       dhmn2br6dtng
	// registry:       LMQ_QUEUES dhmn2br6dtng
	// notify-subject: lmq.n.dhmn2br6dtng
	// props:          LMQ_PROPS q.dhmn2br6dtng
	// objects:        LMQ_OBJ dhmn2br6dtng/*
	//
	// NATS programs connect to the gateway's embedded server with the URL and
	// credentials it keeps in its data directory (mode 0600), or to --nats-url:
	//   nats --server "$(cat DATA-DIR/nats-client.url)" stream info LMQS_34
}
