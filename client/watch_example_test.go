package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/mewledger/ledger/client"
)

// Watch follows one proposal live: its creation (from SinceSeq on, so the
// watch misses nothing appended before it started) and its fulfilment.
func ExampleClient_Watch() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ledgerURL, client.WithDefaultSpace("watching"))
	if err != nil {
		log.Fatal(err)
	}
	ack, err := c.Append(ctx, []byte(`{"protocol":"mew/v0.4","id":"w-1","from":"agent","kind":"mcp/proposal","payload":{"method":"tools/call"}}`))
	if err != nil {
		log.Fatal(err)
	}
	seen := 0
	for ch, err := range c.Watch(ctx, client.WatchOptions{Proposal: "w-1", SinceSeq: ack.Seq - 1}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ch.ID, ch.State)
		if seen++; seen == 1 {
			if _, err := c.Append(ctx, []byte(`{"protocol":"mew/v0.4","id":"w-f","from":"human","kind":"mcp/request","correlation_id":["w-1"],"payload":{"method":"tools/call"}}`)); err != nil {
				log.Fatal(err)
			}
			continue
		}
		break
	}
	// Output:
	// w-1 pending
	// w-1 fulfilled
}
