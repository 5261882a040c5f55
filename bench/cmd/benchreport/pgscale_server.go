package main

import (
	"fmt"
	"io"
	"os"

	"github.com/storhdb/storh-go/storh/postgres/postgrestest"
)

// pgServer is the private PostgreSQL a pgscale run starts when it is given
// no --url (postgrestest: Debian's binaries run as the postgres system
// user, a cluster in a temporary directory listening on a Unix socket
// there only, fsync on, the server's defaults otherwise, as a local
// installation has them). The one setting of its own is the log line
// prefix, which puts each error's SQLSTATE in the log, so that a run can
// count the transactions the server failed (see serverErrors).
type pgServer struct {
	*postgrestest.Server
}

// startServer starts a private server; errors.Is(err,
// postgrestest.ErrUnavailable) when this machine cannot run one.
func startServer() (*pgServer, error) {
	s, err := postgrestest.Start("pgscale-", "log_line_prefix = '"+logPrefix+"'\n")
	if err != nil {
		return nil, fmt.Errorf("%w; or give a server with --url", err)
	}
	return &pgServer{s}, nil
}

// logPrefix starts every server log line with the SQLSTATE of its message
// in brackets ("[40P01] ERROR:  deadlock detected").
const logPrefix = "[%e] "

// logSize is the server log's current length: where the next cell's lines
// start.
func (s *pgServer) logSize() (int64, error) {
	fi, err := os.Stat(s.LogFile())
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// logSince returns the server log from offset on.
func (s *pgServer) logSince(offset int64) ([]byte, error) {
	f, err := os.Open(s.LogFile())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}
