//go:build storh_nopostgres

package storh_test

// startPostgresPass has no PostgreSQL pass to start in a build without
// the driver.
func startPostgresPass() {}
