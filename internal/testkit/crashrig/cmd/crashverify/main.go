// Command crashverify runs crashrig.Verify on a stopped ledger's data
// directory and prints the report as JSON. The crash test builds it
// without the race detector, so that checking a 50,000-event log does not
// take minutes when the tests run with -race.
//
//	crashverify -data DIR -tmp DIR -acked FILE
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/internal/testkit/crashrig"
)

func main() {
	data := flag.String("data", "", "the ledger's --data directory (the server stopped)")
	tmp := flag.String("tmp", "", "a scratch directory for the rebuild")
	ackedFile := flag.String("acked", "", "acknowledgements, as crashrig.WriteAcked writes them")
	flag.Parse()
	if *data == "" || *tmp == "" || *ackedFile == "" {
		flag.Usage()
		os.Exit(2)
	}
	acked, err := crashrig.ReadAcked(*ackedFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashverify:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	log := zerolog.New(os.Stderr).Level(zerolog.WarnLevel)
	rep, err := crashrig.Verify(ctx, *data, *tmp, acked, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashverify:", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		fmt.Fprintln(os.Stderr, "crashverify:", err)
		os.Exit(1)
	}
}
