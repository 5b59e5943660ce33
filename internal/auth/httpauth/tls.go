package httpauth

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/rs/zerolog"
)

// ErrTLS is wrapped by TLSConfig errors.
var ErrTLS = errors.New("httpauth: TLS")

// TLSConfig loads a certificate (PEM chain) and its key and returns a
// server configuration accepting TLS 1.2 and later. Both files are
// required. The certificate is read once: restart to rotate it. Use it as
// http.Server.TLSConfig and serve with ServeTLS(ln, "", "").
func TLSConfig(certFile, keyFile string) (*tls.Config, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, fmt.Errorf("%w: certificate and key files are required", ErrTLS)
	case certFile == "":
		return nil, fmt.Errorf("%w: a key file (%s) needs a certificate file (--tls-cert)", ErrTLS, keyFile)
	case keyFile == "":
		return nil, fmt.Errorf("%w: a certificate file (%s) needs a key file (--tls-key)", ErrTLS, certFile)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: load %s / %s: %w", ErrTLS, certFile, keyFile, err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"h2", "http/1.1"},
	}, nil
}

// IsLoopback reports whether a listen address (host:port, or a bare host)
// binds only loopback interfaces: 127.0.0.0/8, ::1 or "localhost". An empty
// host, 0.0.0.0 and :: bind every interface and are not loopback; any other
// host name is assumed not to be.
func IsLoopback(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// WarnIfExposed logs a warning when the API listens beyond loopback
// without authentication (anyone who can reach the port may read the
// ledger, and append when the write route is on), and reports whether it
// warned. Call it at start-up with the --http address.
func WarnIfExposed(addr string, authOn bool, log zerolog.Logger) bool {
	if authOn || IsLoopback(addr) {
		return false
	}
	log.Warn().Str("addr", addr).
		Msg("HTTP API listens beyond loopback without authentication: anyone who can reach it can read the ledger and append to it; configure API tokens (--auth) or bind 127.0.0.1")
	return true
}

// WarnIfCleartext logs a warning when bearer tokens would travel in clear
// text beyond loopback (auth on, TLS off, non-loopback address), and
// reports whether it warned.
func WarnIfCleartext(addr string, authOn, tlsOn bool, log zerolog.Logger) bool {
	if !authOn || tlsOn || IsLoopback(addr) {
		return false
	}
	log.Warn().Str("addr", addr).
		Msg("HTTP API uses bearer tokens without TLS beyond loopback: tokens can be sniffed; set --tls-cert/--tls-key or terminate TLS in front of it")
	return true
}
