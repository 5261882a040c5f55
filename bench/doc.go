// Package bench holds storh-go's benchmarks against its peers, each peer or
// raw baseline measured in the same `go test -bench` run as storh so that
// ratios come from one machine at one moment.
//
// It is a separate module so that the peer libraries (google/uuid,
// gofrs/uuid, oklog/ulid, rs/xid, the MongoDB driver, bolthold) never
// appear in the dependency graph of storh-go itself.
//
// # Basics
//
// Every benchmark names its contender in the last element of its name,
// impl=…, and its data size, where it has one, in n=…, so that benchstat can
// put peers side by side:
//
//	go test -run '^$' -bench . -count 5 | tee out.txt
//	benchstat -table .name -col /impl out.txt
//
// ids_test.go compares identifier generators and parsers. engine_test.go
// compares storh with bbolt + msgpack written the straightforward way, on
// 197-byte map records keyed by ascending UUIDv7s. query_test.go compares
// storh's secondary indexes and queries with bolthold's (timshannon/bolthold,
// the most used query layer on bbolt) on ~200-byte records with three
// indexed fields: equality and range queries, counts, durable indexed
// inserts and the disk space of index entries. The runner in
// cmd/benchreport runs them all, calls benchstat and writes JSON and a
// Markdown report with the ratios against the targets; docs/benchmarks.md
// quotes it. Its pgscale subcommand measures storh on PostgreSQL from
// several OS processes at once against hand-written pgx code, which go test
// benchmarks, one process each, cannot.
//
// # Caveats
//
// Engine fixtures (10k and 100k records, and 1M with STORH_BENCH_LARGE=1)
// are built once per process in a temporary directory, never in the
// repository, and removed when the run ends. bolthold's fixtures are written
// in its format directly (its Insert costs O(n) per record with an index on
// a field of few values, so loading 1M records through it would take
// hours); TestBoltholdFixtureIsInsert checks that they hold what its Insert
// writes. Durable-write benchmarks fsync
// for real: their numbers depend on the disk far more than on the CPU, so
// only ratios from the same run mean anything.
package bench
