package app_test

import (
	"path/filepath"
	"testing"

	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/natstest"
)

// TestDiskFullProjectionExternalNATS (issue 36): with an external NATS
// server (--nats-url), the projection's volume (a real 64 MiB tmpfs; the
// log is on the server's own disk) fills while envelopes wait to be
// folded. The ledger does not stop: the projection's failure is a storage
// problem (appends refused storage_full, reads answered); once the
// ballast is removed the projection is reopened in-process and folds
// everything acknowledged.
func TestDiskFullProjectionExternalNATS(t *testing.T) {
	srv := natstest.Start(t)
	mnt := mountTmpfs(t, 64<<20)
	a := apptest.Start(t, func(o *app.Options) {
		o.NATSURLs = []string{srv.ClientURL()}
		o.DataDir = filepath.Join(mnt, "data")
	})
	projectionMeetsFullDisk(t, a, mnt, "ext")
}
