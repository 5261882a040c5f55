package reliability

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// powerFS is a FUSE file system for tests that forgets what a power cut
// would. It passes every operation through to a backing directory, and
// remembers, per file, the writes and truncations since the file's last
// fsync or fdatasync, and per directory, the entries created, renamed and
// removed since the directory's last fsync. After the writers are gone and
// the file system is unmounted, cut rebuilds the backing directory as a
// power loss could have left it: what was synced is there, and each thing
// that was not is kept, lost or (for writes) torn, as the cut model says.
//
// The model of the disk (see docs/atomicity.md):
//   - a synced write survives; an unsynced one may be kept, lost, or torn
//     at sector boundaries (4 KiB or 512 B, chosen per cut), and unsynced
//     writes may land in any order, so any subset of them is a legal
//     outcome;
//   - the data of one file is made durable by fsync or fdatasync of that
//     file alone; neither makes the file's name durable;
//   - a directory's entries are made durable by fsync of the directory;
//     unsynced entry changes are kept as a prefix, in the order they were
//     made, as a journaling file system commits them (a rename is one
//     change: it never loses both names or keeps both).
//
// It is test code and deliberately small: hard links, symbolic links,
// device nodes, O_TMPFILE, fallocate, copy_file_range and renames between
// directories are refused (ENOTSUP or EXDEV), so nothing can reach the
// backing directory past the record.
type powerFS struct {
	backing, mnt string
	server       *fuse.Server

	mu    sync.Mutex
	files map[uint64]*pfFile // by inode number of the backing file
	dirs  map[uint64]*pfDir
	root  uint64
	stats pfStats

	// An armed stall (stallSync): the file fsyncs still to let through,
	// and the channels of the one that hangs.
	stallLeft        int
	stalled, unstall chan struct{}
}

// pfStats counts what the file system saw since it was mounted.
type pfStats struct {
	Writes, Truncates, Fsyncs, DirOps, DirFsyncs int
}

type pfFile struct {
	durable []byte    // the content at the last fsync (or at mount)
	pending []pfWrite // since then, in order
}

// pfWrite is a write of data at off, or with size ≥ 0 a truncation.
type pfWrite struct {
	off  int64
	data []byte
	size int64
}

type pfDir struct {
	durable map[string]uint64 // name → inode at the last fsync (or at mount)
	pending []pfDirOp
}

// pfDirOp is one change to a directory's entries, applied whole: inode 0
// removes the name.
type pfDirOp []pfEntry

type pfEntry struct {
	name string
	ino  uint64
}

// cutModel says what a power cut does to what was not synced.
type cutModel string

const (
	// cutDropAll loses every unsynced write and entry change.
	cutDropAll cutModel = "drop-all"
	// cutRandom keeps, loses or tears each unsynced write independently
	// and keeps a random prefix of each directory's unsynced changes.
	cutRandom cutModel = "random"
	// cutMetaFirst is the worst legal case for bbolt: unsynced writes to
	// the two meta pages (the first two pages of a file) land, every
	// other unsynced write and entry change is lost.
	cutMetaFirst cutModel = "meta-first"
)

var cutModels = []cutModel{cutDropAll, cutRandom, cutMetaFirst}

// cutReport says what a cut did.
type cutReport struct {
	Model                     cutModel
	Grain                     int
	Kept, Lost, Torn          int // unsynced writes and truncations
	DirKept, DirUndone, Files int
}

func (r cutReport) String() string {
	grain := ""
	if r.Grain > 0 {
		grain = fmt.Sprintf(" (grain %d B)", r.Grain)
	}
	return fmt.Sprintf("%s cut%s: %d unsynced writes kept, %d lost, %d torn; %d entry changes kept, %d undone; %d files",
		r.Model, grain, r.Kept, r.Lost, r.Torn, r.DirKept, r.DirUndone, r.Files)
}

// errNoFUSE is returned by mountPowerFS when this machine cannot mount a
// FUSE file system.
var errNoFUSE = errors.New("no FUSE: /dev/fuse is missing or mount(2) is refused")

// mountPowerFS mounts a power-cut file system at mnt over backing, taking
// what backing holds as durable.
func mountPowerFS(backing, mnt string) (*powerFS, error) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, fmt.Errorf("%w: %v", errNoFUSE, err)
	}
	p := &powerFS{backing: backing, mnt: mnt}
	return p, p.mount()
}

func (p *powerFS) mount() error {
	if err := p.load(); err != nil {
		return err
	}
	rootOps, err := fusefs.NewLoopbackRoot(p.backing)
	if err != nil {
		return err
	}
	loop := rootOps.(*fusefs.LoopbackNode)
	root := &pfNode{LoopbackNode: loop, pfs: p}
	loop.RootData.RootNode = root
	zero := time.Duration(0)
	server, err := fusefs.Mount(p.mnt, root, &fusefs.Options{
		// The kernel must ask for sizes after every change: bbolt sizes
		// its mapping from them.
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			DirectMountStrict: true, // root needs no fusermount
			FsName:            "storh-powerfs",
			Name:              "powerfs",
		},
	})
	if err != nil {
		return fmt.Errorf("%w: %v", errNoFUSE, err)
	}
	p.server = server
	return startFUSEWatchdog(p.mnt)
}

func init() { roles["fuse-watchdog"] = fuseWatchdogChild }

// startFUSEWatchdog starts a process that aborts the FUSE connection of mnt
// if this process dies while it is mounted. The test process serves the
// file system and, in some tests, uses it too: dying (a test timeout, a
// signal) with one of its own requests in flight, it would wait forever
// for its own answer, a zombie that holds the mount and hangs CI.
func startFUSEWatchdog(mnt string) error {
	var st syscall.Stat_t
	if err := syscall.Stat(mnt, &st); err != nil {
		return err
	}
	conn := fmt.Sprint(unix.Minor(st.Dev)) // the device's minor number names the connection
	if _, err := os.Stat("/sys/fs/fuse/connections/" + conn); err != nil {
		_ = syscall.Mount("none", "/sys/fs/fuse/connections", "fusectl", 0, "")
	}
	cmd := childCmd(context.Background(), "fuse-watchdog", "STORH_FUSE_CONN="+conn, "STORH_FUSE_MNT="+mnt, fmt.Sprintf("STORH_FUSE_PID=%d", os.Getpid()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // not in the test's process group
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait() //nolint:errcheck // reaped; it ends with the mount
	return nil
}

// fuseWatchdogChild polls: when the connection is gone (unmounted) it
// ends; when the process that serves it is gone or a zombie, it aborts
// the connection, which fails the stuck requests and lets it die, and
// detaches the mount.
func fuseWatchdogChild() int {
	conn, pid := os.Getenv("STORH_FUSE_CONN"), os.Getenv("STORH_FUSE_PID")
	dir := "/sys/fs/fuse/connections/" + conn
	for {
		time.Sleep(200 * time.Millisecond)
		if _, err := os.Stat(dir); err != nil {
			return 0
		}
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if i := bytes.LastIndexByte(stat, ')'); err != nil || (i > 0 && i+2 < len(stat) && stat[i+2] == 'Z') {
			_ = os.WriteFile(dir+"/abort", []byte("1"), 0)
			_ = syscall.Unmount(os.Getenv("STORH_FUSE_MNT"), syscall.MNT_DETACH)
			return 0
		}
	}
}

// load takes the backing directory's content as durable.
func (p *powerFS) load() error {
	p.files, p.dirs, p.stats = map[uint64]*pfFile{}, map[uint64]*pfDir{}, pfStats{}
	var walk func(dir string) (uint64, error)
	walk = func(dir string) (uint64, error) {
		ino, err := inode(dir)
		if err != nil {
			return 0, err
		}
		d := &pfDir{durable: map[string]uint64{}}
		p.dirs[ino] = d
		entries, err := os.ReadDir(dir)
		if err != nil {
			return 0, err
		}
		for _, e := range entries {
			path := filepath.Join(dir, e.Name())
			var child uint64
			switch {
			case e.IsDir():
				child, err = walk(path)
			case e.Type().IsRegular():
				if child, err = inode(path); err == nil {
					var b []byte
					if b, err = os.ReadFile(path); err == nil {
						p.files[child] = &pfFile{durable: b}
					}
				}
			default:
				err = fmt.Errorf("powerfs: %s is neither a file nor a directory", path)
			}
			if err != nil {
				return 0, err
			}
			d.durable[e.Name()] = child
		}
		return ino, nil
	}
	var err error
	p.root, err = walk(p.backing)
	return err
}

func inode(path string) (uint64, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, err
	}
	return fi.Sys().(*syscall.Stat_t).Ino, nil
}

// unmount unmounts the file system; every file on it must be closed (the
// writers dead).
func (p *powerFS) unmount() error {
	if p.server == nil {
		return nil
	}
	var err error
	for range 50 {
		if err = p.server.Unmount(); err == nil {
			p.server.Wait()
			p.server = nil
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("powerfs: unmount %s: %w", p.mnt, err)
}

// cut rebuilds the unmounted backing directory as a power cut of the
// given model, driven by r, could leave it, and makes the result the new
// durable state.
func (p *powerFS) cut(model cutModel, r *rand.Rand) (cutReport, error) {
	if p.server != nil {
		return cutReport{}, errors.New("powerfs: cut while mounted")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rep := cutReport{Model: model, Grain: 4096}
	if model == cutRandom && r.IntN(2) == 0 {
		rep.Grain = 512
	}
	fresh := p.backing + ".cut"
	if err := os.RemoveAll(fresh); err != nil {
		return rep, err
	}
	contents := map[uint64][]byte{} // a file's content is decided once
	var build func(ino uint64, dir string) error
	build = func(ino uint64, dir string) error {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		for name, child := range p.dirs[ino].after(model, r, &rep) {
			path := filepath.Join(dir, name)
			if _, isDir := p.dirs[child]; isDir {
				if err := build(child, path); err != nil {
					return err
				}
				continue
			}
			f, ok := p.files[child]
			if !ok {
				return fmt.Errorf("powerfs: %s names inode %d, which it never saw", path, child)
			}
			b, done := contents[child]
			if !done {
				b = f.after(model, r, rep.Grain, &rep)
				contents[child] = b
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				return err
			}
			rep.Files++
		}
		return nil
	}
	if err := build(p.root, fresh); err != nil {
		return rep, err
	}
	if err := os.RemoveAll(p.backing); err != nil {
		return rep, err
	}
	if err := os.Rename(fresh, p.backing); err != nil {
		return rep, err
	}
	return rep, p.load()
}

// after is the directory's entries after a cut.
func (d *pfDir) after(model cutModel, r *rand.Rand, rep *cutReport) map[string]uint64 {
	keep := 0
	if model == cutRandom {
		keep = r.IntN(len(d.pending) + 1)
	}
	rep.DirKept += keep
	rep.DirUndone += len(d.pending) - keep
	return applyDirOps(d.durable, d.pending[:keep])
}

func applyDirOps(base map[string]uint64, ops []pfDirOp) map[string]uint64 {
	out := make(map[string]uint64, len(base))
	for k, v := range base {
		out[k] = v
	}
	for _, op := range ops {
		for _, e := range op {
			if e.ino == 0 {
				delete(out, e.name)
			} else {
				out[e.name] = e.ino
			}
		}
	}
	return out
}

// after is the file's content after a cut.
func (f *pfFile) after(model cutModel, r *rand.Rand, grain int, rep *cutReport) []byte {
	b := bytes.Clone(f.durable)
	for _, w := range f.pending {
		if w.size >= 0 {
			if model == cutRandom && r.IntN(2) == 0 {
				b = resize(b, w.size)
				rep.Kept++
			} else {
				rep.Lost++
			}
			continue
		}
		switch model {
		case cutDropAll:
			rep.Lost++
		case cutMetaFirst:
			// bbolt's meta pages are its first two pages; its page size
			// is the OS page size.
			meta := int64(2 * os.Getpagesize())
			if w.off >= meta {
				rep.Lost++
				continue
			}
			end := min(w.off+int64(len(w.data)), meta)
			b = applyWrite(b, w.off, w.data[:end-w.off])
			rep.Kept++
		case cutRandom:
			switch r.IntN(3) {
			case 0:
				b = applyWrite(b, w.off, w.data)
				rep.Kept++
			case 1:
				rep.Lost++
			default:
				// Torn: each sector the write covers lands or not.
				g := int64(grain)
				for at := w.off; at < w.off+int64(len(w.data)); {
					next := min((at/g+1)*g, w.off+int64(len(w.data)))
					if r.IntN(2) == 0 {
						b = applyWrite(b, at, w.data[at-w.off:next-w.off])
					}
					at = next
				}
				rep.Torn++
			}
		}
	}
	return b
}

func applyWrite(b []byte, off int64, data []byte) []byte {
	if end := off + int64(len(data)); end > int64(len(b)) {
		b = resize(b, end)
	}
	copy(b[off:], data)
	return b
}

func resize(b []byte, size int64) []byte {
	if size <= int64(len(b)) {
		return b[:size]
	}
	return append(b, make([]byte, size-int64(len(b)))...)
}

// The recording side: called with the operation done on the backing
// directory, under p.mu so that the record's order is the backing order.

func (p *powerFS) file(ino uint64) *pfFile {
	f, ok := p.files[ino]
	if !ok {
		f = &pfFile{} // created on the mount: durable content is empty
		p.files[ino] = f
	}
	return f
}

func (p *powerFS) truncate(ino uint64, size int64) {
	f := p.file(ino)
	f.pending = append(f.pending, pfWrite{size: size})
	p.stats.Truncates++
}

func (p *powerFS) dirOp(dir uint64, op ...pfEntry) {
	d, ok := p.dirs[dir]
	if !ok {
		d = &pfDir{durable: map[string]uint64{}}
		p.dirs[dir] = d
	}
	d.pending = append(d.pending, op)
	p.stats.DirOps++
}

func (p *powerFS) syncFile(ino uint64) {
	f := p.file(ino)
	for _, w := range f.pending {
		if w.size >= 0 {
			f.durable = resize(f.durable, w.size)
		} else {
			f.durable = applyWrite(f.durable, w.off, w.data)
		}
	}
	f.pending = nil
	p.stats.Fsyncs++
}

func (p *powerFS) syncDir(ino uint64) {
	if d, ok := p.dirs[ino]; ok {
		d.durable = applyDirOps(d.durable, d.pending)
		d.pending = nil
	}
	p.stats.DirFsyncs++
}

// pfNode is a loopback node whose changes are recorded.
type pfNode struct {
	*fusefs.LoopbackNode
	pfs *powerFS
}

func (n *pfNode) WrapChild(ctx context.Context, ops fusefs.InodeEmbedder) fusefs.InodeEmbedder {
	return &pfNode{LoopbackNode: ops.(*fusefs.LoopbackNode), pfs: n.pfs}
}

// ino is the backing inode number: what go-fuse gives a loopback node,
// except the root, which FUSE numbers 1.
func (n *pfNode) ino() uint64 {
	if n.EmbeddedInode() == n.Root() {
		return n.pfs.root
	}
	return n.StableAttr().Ino
}

func (n *pfNode) backingPath(name string) string {
	return filepath.Join(n.pfs.backing, n.Path(n.Root()), name)
}

func (n *pfNode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	n.pfs.mu.Lock()
	defer n.pfs.mu.Unlock()
	_, statErr := os.Lstat(n.backingPath(name))
	existed := statErr == nil
	ch, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return ch, fh, fl, errno
	}
	ino := ch.StableAttr().Ino
	n.pfs.file(ino) // a new file is known, and empty, from here on
	if existed && flags&syscall.O_TRUNC != 0 {
		n.pfs.truncate(ino, 0)
	}
	if !existed {
		n.pfs.dirOp(n.ino(), pfEntry{name, ino})
	}
	return ch, &pfHandle{f: fh.(*fusefs.LoopbackFile), ino: ino, pfs: n.pfs}, fl, 0
}

func (n *pfNode) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	n.pfs.mu.Lock()
	defer n.pfs.mu.Unlock()
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return fh, fl, errno
	}
	if flags&syscall.O_TRUNC != 0 {
		n.pfs.truncate(n.ino(), 0)
	}
	return &pfHandle{f: fh.(*fusefs.LoopbackFile), ino: n.ino(), pfs: n.pfs}, fl, 0
}

func (n *pfNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	n.pfs.mu.Lock()
	defer n.pfs.mu.Unlock()
	ch, errno := n.LoopbackNode.Mkdir(ctx, name, mode, out)
	if errno == 0 {
		ino := ch.StableAttr().Ino
		n.pfs.dirs[ino] = &pfDir{durable: map[string]uint64{}}
		n.pfs.dirOp(n.ino(), pfEntry{name, ino})
	}
	return ch, errno
}

func (n *pfNode) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.remove(name, func() syscall.Errno { return n.LoopbackNode.Unlink(ctx, name) })
}

func (n *pfNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.remove(name, func() syscall.Errno { return n.LoopbackNode.Rmdir(ctx, name) })
}

// remove runs op, which removes name, and records the removal.
func (n *pfNode) remove(name string, op func() syscall.Errno) syscall.Errno {
	n.pfs.mu.Lock()
	defer n.pfs.mu.Unlock()
	errno := op()
	if errno == 0 {
		n.pfs.dirOp(n.ino(), pfEntry{name, 0})
	}
	return errno
}

func (n *pfNode) Rename(ctx context.Context, name string, newParent fusefs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	to, ok := newParent.(*pfNode)
	if !ok || to.ino() != n.ino() {
		return syscall.EXDEV // one directory's record cannot hold it
	}
	if flags&^uint32(unix.RENAME_NOREPLACE) != 0 {
		return syscall.ENOTSUP
	}
	n.pfs.mu.Lock()
	defer n.pfs.mu.Unlock()
	ino, err := inode(n.backingPath(name))
	if err != nil {
		return fusefs.ToErrno(err)
	}
	errno := n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
	if errno == 0 {
		n.pfs.dirOp(n.ino(), pfEntry{name, 0}, pfEntry{newName, ino})
	}
	return errno
}

func (n *pfNode) Setattr(ctx context.Context, f fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	n.pfs.mu.Lock()
	defer n.pfs.mu.Unlock()
	errno := n.LoopbackNode.Setattr(ctx, unwrap(f), in, out)
	if size, ok := in.GetSize(); ok && errno == 0 {
		n.pfs.truncate(n.ino(), int64(size))
	}
	return errno
}

func (n *pfNode) Getattr(ctx context.Context, f fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	return n.LoopbackNode.Getattr(ctx, unwrap(f), out)
}

func (n *pfNode) Statx(ctx context.Context, f fusefs.FileHandle, flags, mask uint32, out *fuse.StatxOut) syscall.Errno {
	return n.LoopbackNode.Statx(ctx, unwrap(f), flags, mask, out)
}

func (n *pfNode) OpendirHandle(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return fh, fl, errno
	}
	return &pfDirHandle{inner: fh, ino: n.ino(), pfs: n.pfs}, fl, 0
}

// What would bypass the record is refused.

func (n *pfNode) Link(context.Context, fusefs.InodeEmbedder, string, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.ENOTSUP
}

func (n *pfNode) Symlink(context.Context, string, string, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.ENOTSUP
}

func (n *pfNode) Mknod(context.Context, string, uint32, uint32, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.ENOTSUP
}

func (n *pfNode) Tmpfile(context.Context, uint32, uint32, *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.ENOTSUP
}

func (n *pfNode) CopyFileRange(context.Context, fusefs.FileHandle, uint64, *fusefs.Inode, fusefs.FileHandle, uint64, uint64, uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOTSUP
}

func unwrap(f fusefs.FileHandle) fusefs.FileHandle {
	if h, ok := f.(*pfHandle); ok {
		return h.f
	}
	return f
}

// pfHandle is an open file whose writes and syncs are recorded. It holds
// the loopback file rather than embedding it, so that no method of the
// loopback file (passthrough, fallocate) is reached unrecorded.
type pfHandle struct {
	f   *fusefs.LoopbackFile
	ino uint64
	pfs *powerFS
}

func (h *pfHandle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return h.f.Read(ctx, buf, off)
}

func (h *pfHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.pfs.mu.Lock()
	defer h.pfs.mu.Unlock()
	n, errno := h.f.Write(ctx, data, off)
	if n > 0 {
		f := h.pfs.file(h.ino)
		f.pending = append(f.pending, pfWrite{off: off, data: bytes.Clone(data[:n]), size: -1})
		h.pfs.stats.Writes++
	}
	return n, errno
}

func (h *pfHandle) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	return h.Write(ctx, bytes.Join(data, nil), off)
}

func (h *pfHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	h.pfs.mu.Lock()
	if h.pfs.stallLeft > 0 {
		if h.pfs.stallLeft--; h.pfs.stallLeft == 0 {
			stalled, unstall := h.pfs.stalled, h.pfs.unstall
			h.pfs.mu.Unlock()
			close(stalled)
			<-unstall
			return syscall.EIO
		}
	}
	defer h.pfs.mu.Unlock()
	if errno := h.f.Fsync(ctx, flags); errno != 0 {
		return errno
	}
	h.pfs.syncFile(h.ino)
	return 0
}

func (h *pfHandle) Flush(ctx context.Context) syscall.Errno   { return h.f.Flush(ctx) }
func (h *pfHandle) Release(ctx context.Context) syscall.Errno { return h.f.Release(ctx) }
func (h *pfHandle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return h.f.Lseek(ctx, off, whence)
}

// stallSync makes the n-th file fsync from now hang without syncing
// anything; stalled is closed when it does. release lets it fail with EIO
// (and disarms a stall that has not happened). Killing the writer in
// between is a power cut in the middle of an fsync: what is pending then
// is exactly what that fsync was asked to make durable. The writer cannot
// die while its fsync hangs (FUSE waits for the answer), so release must
// follow the kill.
func (p *powerFS) stallSync(n int) (stalled <-chan struct{}, release func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stallLeft, p.stalled, p.unstall = n, make(chan struct{}), make(chan struct{})
	unstall := p.unstall
	var once sync.Once
	return p.stalled, func() {
		once.Do(func() {
			p.mu.Lock()
			p.stallLeft = 0
			p.mu.Unlock()
			close(unstall)
		})
	}
}

// pfDirHandle is an open directory whose fsync is recorded.
type pfDirHandle struct {
	inner fusefs.FileHandle
	ino   uint64
	pfs   *powerFS
}

func (d *pfDirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	return d.inner.(fusefs.FileReaddirenter).Readdirent(ctx)
}

func (d *pfDirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.inner.(fusefs.FileSeekdirer).Seekdir(ctx, off)
}

func (d *pfDirHandle) Releasedir(ctx context.Context, flags uint32) {
	d.inner.(fusefs.FileReleasedirer).Releasedir(ctx, flags)
}

func (d *pfDirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	d.pfs.mu.Lock()
	defer d.pfs.mu.Unlock()
	if errno := d.inner.(fusefs.FileFsyncdirer).Fsyncdir(ctx, flags); errno != 0 {
		return errno
	}
	d.pfs.syncDir(d.ino)
	return 0
}

// requireFUSE mounts a power-cut file system over a new backing directory
// and unmounts it when the test ends. Without FUSE the test skips, or
// fails when STORH_REQUIRE_FUSE=1 (CI sets it: there the power-loss
// suite must run).
func requireFUSE(t *testing.T) (p *powerFS, backing, mnt string) {
	t.Helper()
	dir := t.TempDir()
	backing, mnt = filepath.Join(dir, "backing"), filepath.Join(dir, "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p, err := mountPowerFS(backing, mnt)
	if err != nil {
		if os.Getenv("STORH_REQUIRE_FUSE") == "1" || !errors.Is(err, errNoFUSE) {
			t.Fatalf("power-cut file system: %v (STORH_REQUIRE_FUSE=1: this suite must run here)", err)
		}
		t.Skipf("power-cut file system: %v; set STORH_REQUIRE_FUSE=1 to fail instead", err)
	}
	t.Cleanup(func() {
		if err := p.unmount(); err != nil {
			t.Error(err)
		}
	})
	return p, backing, mnt
}

// remount mounts p again after a cut.
func (p *powerFS) remount(t testing.TB) {
	t.Helper()
	if err := p.mount(); err != nil {
		t.Fatal(err)
	}
}
