// Package reliability holds the suites that try to make storh lose or
// damage data: it has no API, only tests and their helpers.
//
// A storage library is trusted for one reason: it never loses what it
// acknowledged. Every suite here is built to fail if that stops being true,
// and docs/atomicity.md says which claim each one proves.
//
// # Suites
//
//   - Crash safety (crash_test.go): a child process writes through every
//     write path and reports each operation's intent before the call and its
//     acknowledgement after it; the parent kills it with SIGKILL at random
//     moments, reopens the file and checks acknowledged writes, atomicity of
//     batches and transactions, counters and checksums.
//   - Power loss (powerloss_test.go, on powerfs_test.go): the crash
//     suite's writer and the queue crash test run on a FUSE file system
//     that records what was not yet synced; after the kill it is cut as a
//     power loss could leave it (everything unsynced lost; a random mix
//     kept, lost and torn at sector boundaries; bbolt's meta pages only),
//     and the same checks run. Half the cuts land inside an fsync.
//   - Corruption (corrupt_test.go): damaged record values must be named by
//     Verify, refused by reads and quarantined by Repair; damaged files
//     (truncated, overwritten pages, zeroed meta pages) must be reported as
//     damaged by Open or Verify, in a child process so that a panic or a
//     fatal fault is caught and reported.
//   - Bad input (badinput_test.go, badinput_cli_test.go): one table across
//     the public API and the CLI; each row asserts the typed error, a
//     helpful message and that the database is byte-for-byte unchanged.
//   - Resource faults (resource_test.go): a file that cannot grow
//     (RLIMIT_FSIZE, WithMaxSize) and a file locked by another process.
//   - Fuzzing and races (fuzz_test.go, soak_test.go): the stored-value
//     decoder, the raw-bytes WhereEqual probe, and a long -race run of
//     writers, streams, transactions, bulk writes and reopens at once.
//   - Invariants (invariants_*_test.go): under the storh_invariants build
//     tag a write that breaks a counter must fail its commit.
//
// # Extending
//
// There is one crash harness, one bad-input table and one fuzz corpus
// layout. A new write path (indexes, the queue) adds an operation to the
// crash child (crashOps) and to the parent's model; a new error adds rows
// to badCases or cliCases; a new decoder adds a fuzz target here with its
// seeds under testdata/fuzz/FuzzName and a line in .ci/fuzz-targets.txt.
//
// # Knobs
//
// STORH_LONG=1 (testkit.Long) runs every test at full size, as CI does;
// without it the cycles, jobs and soak are smaller. STORH_CRASH_CYCLES sets
// the number of kill cycles (50 long, 15 otherwise); STORH_POWER_CUTS the
// power cuts per model (30 long, 6 otherwise); STORH_REQUIRE_FUSE=1 makes the power-loss tests fail rather
// than skip where FUSE cannot be mounted; STORH_SOAK=1 lengthens the race soak; STORH_RELIABILITY_SEED
// replays a run with the seed it logged.
package reliability
