package app

import (
	"log"
	"strings"

	"github.com/rs/zerolog"
)

// zerologStd adapts zerolog for http.Server.ErrorLog (TLS handshake and
// connection errors), at warn level.
func zerologStd(l zerolog.Logger) *log.Logger {
	return log.New(stdWriter{l}, "", 0)
}

type stdWriter struct{ l zerolog.Logger }

func (w stdWriter) Write(p []byte) (int, error) {
	w.l.Warn().Msg(strings.TrimSpace(string(p)))
	return len(p), nil
}
