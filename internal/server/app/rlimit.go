package app

import (
	"fmt"
	"syscall"
)

// DescriptorReserve is how many file descriptors the ledger keeps free
// for everything but HTTP connections: the embedded NATS server's store
// and its client connections, Pebble's files, logs, the as-of and verify
// projections. The HTTP connection cap (MaxConns) must fit under the
// process's descriptor limit with this much to spare.
const DescriptorReserve = 256

// minFittedConns is the smallest connection cap fitDescriptors lowers to.
const minFittedConns = 16

// descriptorLimit returns RLIMIT_NOFILE's soft limit (the Go runtime has
// raised it to the hard limit at start on Linux).
var descriptorLimit = func() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	return rl.Cur, nil
}

// fitDescriptors checks MaxConns against the descriptor limit (issue 29
// item 1): MaxConns + DescriptorReserve must fit. A default MaxConns is
// lowered to fit (the returned warning says so); an explicit one that
// does not fit is an error naming both numbers and the ways out.
func fitDescriptors(o *Options) (warning string, err error) {
	if o.MaxConns < 0 {
		return "", nil
	}
	limit, err := descriptorLimit()
	if err != nil {
		return "", nil // no limit to check against
	}
	need := uint64(o.MaxConns) + DescriptorReserve
	if limit >= need {
		return "", nil
	}
	fit := int64(limit) - DescriptorReserve
	if !o.maxConnsDefault || fit < minFittedConns {
		return "", fmt.Errorf("%w: the descriptor limit (ulimit -n) is %d, too low for %d HTTP connections plus %d descriptors for NATS and Pebble: raise it to at least %d or lower --http-max-conns to %d or less",
			ErrOptions, limit, o.MaxConns, DescriptorReserve, need, max(fit, minFittedConns))
	}
	w := fmt.Sprintf("the descriptor limit (ulimit -n) is %d: HTTP connections capped at %d instead of %d, keeping %d descriptors for NATS and Pebble (raise the limit, or set --http-max-conns, to choose)",
		limit, fit, o.MaxConns, DescriptorReserve)
	o.MaxConns = int(fit)
	if o.MaxStreams > o.MaxConns/4 {
		o.MaxStreams = max(o.MaxConns/4, 1)
	}
	return w, nil
}
