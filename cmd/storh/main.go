// Command storh is the command-line tool of storh-go: it creates and
// inspects databases, reads and writes records, moves data in and out as
// JSON lines (MongoDB exports included), and checks, repairs, compacts and
// backs up database files.
//
// Run `storh demo` for a tour and `storh help` for the commands;
// docs/cli.md describes each one with an example.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	// Registers postgres:// and postgresql://: every command that takes a
	// database takes a PostgreSQL URL too.
	_ "github.com/storhdb/storh-go/storh/postgres"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
