package store

import (
	"context"
	"errors"
	"io"
	"iter"
	"time"
)

// ErrNotFound is returned, wrapped, by Get, GetRange and Stat when the key
// does not exist. Delete of a missing key is not an error.
var ErrNotFound = errors.New("store: object not found")

// ErrExists is returned, wrapped, by PutIfAbsent when the key already exists.
var ErrExists = errors.New("store: object already exists")

// ObjectInfo describes a stored object.
type ObjectInfo struct {
	Key          string
	Size         int64
	ETag         string // without surrounding quotes
	LastModified time.Time
	ContentType  string
	// Metadata holds user metadata with lower-cased keys.
	Metadata map[string]string
}

// PutOptions carries the optional attributes of a new object.
type PutOptions struct {
	// ContentType defaults to "application/octet-stream".
	ContentType string
	// Metadata is stored as user metadata. Keys are case-insensitive and come
	// back lower-cased; values should be printable ASCII because S3 carries
	// them in HTTP headers.
	Metadata map[string]string
}

// ObjectStore is a flat key space of immutable-once-written blobs.
//
// Keys are non-empty UTF-8 strings; "/" separates path segments by
// convention only. On a file-system-backed endpoint (the embedded gateway) a
// key cannot also be a path prefix of another key: "a/b" and "a/b/c" cannot
// coexist, because "a/b" would have to be both a file and a directory.
//
// All methods are safe for concurrent use.
type ObjectStore interface {
	// Put streams r to key, replacing any existing object. size is the exact
	// number of bytes r yields, or -1 when unknown, in which case the data is
	// uploaded in parts as it is read. A reader that yields fewer bytes than a
	// known size makes Put fail and leaves any previous object untouched.
	// The returned info carries Key, Size, ETag, ContentType and Metadata;
	// LastModified is set only when the server reports it.
	Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) (ObjectInfo, error)

	// PutIfAbsent is Put that creates key only if it does not exist yet; it
	// returns an error wrapping ErrExists otherwise and leaves the existing
	// object untouched. Among concurrent PutIfAbsent callers for one key
	// exactly one succeeds. r may be left partly unread when the key exists.
	PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) (ObjectInfo, error)

	// Get opens the object for reading; the caller must close the reader.
	// It returns an error wrapping ErrNotFound when the key does not exist.
	Get(ctx context.Context, key string) (io.ReadCloser, ObjectInfo, error)

	// GetRange opens length bytes starting at offset. length -1 reads to the
	// end; a range running past the end is cut short at the end. offset must
	// be >= 0 and length > 0 or -1; an offset at or past the end of the object
	// is an error (not ErrNotFound). A missing key gives ErrNotFound.
	GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)

	// Stat returns the object's info, or an error wrapping ErrNotFound.
	Stat(ctx context.Context, key string) (ObjectInfo, error)

	// List yields every object whose key starts with prefix, recursively, in
	// ascending byte order of keys. An empty prefix lists everything.
	// Listed infos carry Key, Size, ETag and LastModified only. After an
	// error the sequence ends; breaking out of the loop early is fine.
	List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error]

	// Delete removes key. Deleting a missing key succeeds, as in S3.
	Delete(ctx context.Context, key string) error
}
