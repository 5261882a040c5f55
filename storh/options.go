package storh

import (
	"fmt"
	"os"
	"time"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Option configures Open; the With… functions make them. It is opaque so
// that every setting passes its constructor's checks. The zero Option
// changes nothing.
type Option struct{ apply func(*engine.Options) error }

// openOptions applies opts to the engine's defaults.
func openOptions(opts []Option) (engine.Options, error) {
	var o engine.Options
	for _, opt := range opts {
		if opt.apply == nil {
			continue
		}
		if err := opt.apply(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// WithLockTimeout bounds how long Open waits for another process to release
// the file (default 1s). After it, Open fails with ErrLocked.
func WithLockTimeout(d time.Duration) Option {
	return Option{func(o *engine.Options) error {
		if d <= 0 {
			return fmt.Errorf("%w: WithLockTimeout(%v): the timeout must be positive", ErrInvalidOption, d)
		}
		o.LockTimeout = d
		return nil
	}}
}

// WithReadOnly opens the database with a shared lock: several read-only
// processes may open it at once, and every write fails with ErrReadOnly.
// It creates nothing: a file that does not exist fails Open with
// ErrNotFound. On PostgreSQL it takes no lock and writes nothing, so it
// opens a hot standby too; a schema that does not exist or holds no store
// fails Open with ErrNotFound, naming what is missing (see
// docs/postgres.md, read replicas).
func WithReadOnly() Option {
	return Option{func(o *engine.Options) error { o.ReadOnly = true; return nil }}
}

// WithReadURL opens a database on PostgreSQL (Open with a postgres:// URL)
// that sends its reads to the hot standby at url, a standby of the URL's
// server in the same database, and its writes to the URL's server, the
// primary. Reads are as fresh as the standby, with one rule: a DB's reads
// see every write committed through that DB (read-your-writes), and, for
// Watch, every commit its watches have been told of, since a read goes to
// the standby only once the standby has replayed them, and to the primary
// until then. Inside Update everything is on the primary. See
// docs/postgres.md (read replicas). Open fails with ErrInvalidOption
// when url names a server that is not a hot standby or another
// database, and with ErrUnsupported for a file (and in OpenStore, where
// the store is opened already).
func WithReadURL(url string) Option {
	return Option{func(o *engine.Options) error {
		if url == "" {
			return fmt.Errorf("%w: WithReadURL(\"\"): give the URL of a hot standby", ErrInvalidOption)
		}
		o.ReadURL = url
		return nil
	}}
}

// WithoutSync skips fsync on commit: unsafe. A crash (of the machine, not
// only the process) can lose acknowledged writes or damage the file. Use it
// for tests and data you can rebuild, never for data you keep.
func WithoutSync() Option {
	return Option{func(o *engine.Options) error { o.UnsafeNoSync = true; return nil }}
}

// WithInitialMmapSize sets the address space mapped at open (default 1 GiB).
// While the file fits in it, readers never block writers; it costs no disk.
func WithInitialMmapSize(bytes int) Option {
	return Option{func(o *engine.Options) error {
		if bytes < 0 {
			return fmt.Errorf("%w: WithInitialMmapSize(%d): must not be negative", ErrInvalidOption, bytes)
		}
		o.InitialMmapSize = bytes
		return nil
	}}
}

// WithMaxSize caps the file size; a write that would grow the file past it
// fails with ErrTooLarge and stores nothing.
func WithMaxSize(bytes int) Option {
	return Option{func(o *engine.Options) error {
		if bytes < 0 {
			return fmt.Errorf("%w: WithMaxSize(%d): must not be negative", ErrInvalidOption, bytes)
		}
		o.MaxSize = bytes
		return nil
	}}
}

// WithMaxBatch caps how many concurrent single writes share one commit
// (default 1024).
func WithMaxBatch(n int) Option {
	return Option{func(o *engine.Options) error {
		if n < 1 {
			return fmt.Errorf("%w: WithMaxBatch(%d): must be at least 1", ErrInvalidOption, n)
		}
		o.MaxBatch = n
		return nil
	}}
}

// WithFileMode sets the permissions of a newly created file (default 0600).
func WithFileMode(mode os.FileMode) Option {
	return Option{func(o *engine.Options) error { o.FileMode = mode; return nil }}
}

// CollectionOption configures a collection handle; the With… functions
// make them. The zero CollectionOption changes nothing.
type CollectionOption struct{ apply func(*collConfig) error }

type collConfig struct {
	gen         func() uuidv7.UUID
	indexes     []engine.IndexSpec
	mustExist   bool
	maxAttempts int
	backoff     *[2]time.Duration // WithBackoff; nil: not given
	retention   time.Duration
	ttl         *ttlConf // WithTTL; nil: none
	schema      []byte   // WithSchema; nil: none
	feed        int64    // WithChangeFeed's keep; 0: none asked
}

// WithRetention gives a log a retention: its records older than d, by the
// database's clock, disappear from the handle's reads at once, and are
// deleted by the database's background sweep (see WithSweepEvery) or by
// ApplyRetention. Only logs take it: Docs and Queue refuse it with
// ErrInvalidOption.
func WithRetention(d time.Duration) CollectionOption {
	return CollectionOption{func(c *collConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: WithRetention(%v): a retention must be positive", ErrInvalidOption, d)
		}
		c.retention = d
		return nil
	}}
}

// WithMaxAttempts sets how many claims a job of the queue gets (n >= 1;
// default DefaultMaxAttempts): a job that fails, or whose lease ends, on its
// nth claim is dead. It is stored with the queue when the handle's first
// write creates it, and every handle, process and the CLI then apply the
// stored value; a handle opened with a value that differs from the stored
// one fails with ErrInvalidOption (change it with DB.SetQueueOptions). A
// queue created by a storh from before stores none: the handle's value
// applies to its operations until SetQueueOptions stores one.
// Only queues take it: Docs and Log refuse it with ErrInvalidOption.
func WithMaxAttempts(n int) CollectionOption {
	return CollectionOption{func(c *collConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: WithMaxAttempts(%d): a job needs at least one attempt", ErrInvalidOption, n)
		}
		c.maxAttempts = n
		return nil
	}}
}

// WithBackoff makes a failed job wait before its next attempt: a Fail (or
// FailClaim) that leaves the job pending makes it due min·2^(attempts-1)
// later, by the database's clock (WithClock), capped at max, then scaled by
// a random factor in [0.8, 1.2) so that jobs failing together do not come
// back together. A lease that ends is not backed off: the job waited its
// lease already and is claimable at once. Both are whole milliseconds, min
// at least 1ms and max at least min; WithBackoff(0, 0) asks for no backoff
// (the default). Like WithMaxAttempts it is stored with the queue when the
// handle creates it, and a handle whose backoff differs from the stored one
// fails with ErrInvalidOption. Only queues take it.
func WithBackoff(min, max time.Duration) CollectionOption {
	return CollectionOption{func(c *collConfig) error {
		switch {
		case min == 0 && max == 0:
		case min < time.Millisecond || max < min:
			return fmt.Errorf("%w: WithBackoff(%v, %v): min must be at least 1ms and max at least min (WithBackoff(0, 0) for none)", ErrInvalidOption, min, max)
		case min%time.Millisecond != 0 || max%time.Millisecond != 0:
			return fmt.Errorf("%w: WithBackoff(%v, %v): the backoff is kept in whole milliseconds", ErrInvalidOption, min, max)
		}
		c.backoff = &[2]time.Duration{min, max}
		return nil
	}}
}

// queueRule is the rule the options give, zero where they give none.
func (c collConfig) queueRule() engine.QueueRule {
	r := engine.QueueRule{MaxAttempts: c.maxAttempts}
	if c.backoff != nil {
		r.BackoffMin, r.BackoffMax = c.backoff[0].Milliseconds(), c.backoff[1].Milliseconds()
	}
	return r
}

// WithClock makes the database read the time from now instead of time.Now:
// queue leases, lease ends and completion times follow it, and so do
// retention and expiry (WithRetention, WithTTL). For tests that
// need time to pass on command.
func WithClock(now func() time.Time) Option {
	return Option{func(o *engine.Options) error {
		if now == nil {
			return fmt.Errorf("%w: WithClock(nil)", ErrInvalidOption)
		}
		o.Clock = now
		return nil
	}}
}

// WithoutBackground opens the database without background sweeps: the
// collections opened WithRetention or WithTTL still hide their expired
// records from reads, and are deleted only when the program calls
// ApplyRetention or ApplyTTL.
func WithoutBackground() Option {
	return Option{func(o *engine.Options) error { o.NoBackground = true; return nil }}
}

// DefaultSweepEvery is the pause between two background sweeps of the
// collections with a retention or a time to live: a record is deleted
// within about this long after it expires (plus the sweep's own time).
const DefaultSweepEvery = 5 * time.Second

// WithSweepEvery sets the pause between two background sweeps (default
// DefaultSweepEvery). The sweep deletes in short transactions (sized to
// take about 20ms each, at most 5000 records) and pauses between them as
// long as the last one took, so writers get the database. The
// pause is real time; what has expired is decided by the database's
// clock (WithClock). d must be positive (else ErrInvalidOption).
func WithSweepEvery(d time.Duration) Option {
	return Option{func(o *engine.Options) error {
		if d <= 0 {
			return fmt.Errorf("%w: WithSweepEvery(%v): the pause must be positive", ErrInvalidOption, d)
		}
		o.SweepEvery = d
		return nil
	}}
}

// WithoutCreate opens a collection only if it exists: a missing one fails
// with ErrNotFound instead of being created by the first write. It is how to
// open a collection by a name that came from outside (a request, a flag)
// without making one.
func WithoutCreate() CollectionOption {
	return CollectionOption{func(c *collConfig) error { c.mustExist = true; return nil }}
}

// WithIDGenerator makes Put take ids from gen instead of uuidv7.New. Every id
// gen returns is checked: one that is not a UUIDv7 fails the write with
// ErrInvalidID. gen must be safe for concurrent use if the handle is shared.
func WithIDGenerator(gen func() uuidv7.UUID) CollectionOption {
	return CollectionOption{func(c *collConfig) error {
		if gen == nil {
			return fmt.Errorf("%w: WithIDGenerator(nil): pass a generator function", ErrInvalidOption)
		}
		c.gen = gen
		return nil
	}}
}

// WithDeterministicIDs makes Put take ids from a seeded generator whose clock
// starts at startMs and advances one millisecond per id: the same seed gives
// the same ids in every run, for repeatable test data. Each handle opened
// with it starts the sequence anew, so open the handle once and share it.
func WithDeterministicIDs(seed uint64, startMs int64) CollectionOption {
	return CollectionOption{func(c *collConfig) error {
		if startMs < 0 || startMs > uuidv7.MaxTimestampMs {
			return fmt.Errorf("%w: WithDeterministicIDs(%d, %d): %w", ErrInvalidOption, seed, startMs, uuidv7.ErrTimestampRange)
		}
		c.gen = uuidv7.NewDeterministic(seed, startMs, 1).New
		return nil
	}}
}

// collOptions applies opts for a collection of kind.
func collOptions(kind engine.Kind, opts []CollectionOption) (collConfig, error) {
	var cfg collConfig
	for _, opt := range opts {
		if opt.apply == nil {
			continue
		}
		if err := opt.apply(&cfg); err != nil {
			return cfg, err
		}
	}
	if cfg.maxAttempts != 0 && kind != engine.KindQueue {
		return cfg, fmt.Errorf("%w: WithMaxAttempts is for queues, not a %s collection", ErrInvalidOption, kind)
	}
	if cfg.backoff != nil && kind != engine.KindQueue {
		return cfg, fmt.Errorf("%w: WithBackoff is for queues, not a %s collection", ErrInvalidOption, kind)
	}
	if cfg.schema != nil && kind == engine.KindQueue {
		return cfg, fmt.Errorf("%w: WithSchema is for docs and logs, not a queue", ErrInvalidOption)
	}
	if cfg.feed != 0 && kind == engine.KindQueue {
		return cfg, fmt.Errorf("%w: WithChangeFeed is for docs and logs, not a queue", ErrInvalidOption)
	}
	if cfg.retention != 0 && kind != engine.KindLog {
		return cfg, fmt.Errorf("%w: WithRetention is for logs, not a %s collection", ErrInvalidOption, kind)
	}
	if cfg.ttl != nil && kind != engine.KindDocs {
		return cfg, fmt.Errorf("%w: WithTTL is for docs, not a %s collection", ErrInvalidOption, kind)
	}
	return cfg, nil
}
