package s3

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/t1pipe/t1/store"
)

// probeTimeout bounds the connectivity check in Open so that a dead endpoint
// fails fast instead of riding out the client's retry schedule.
const probeTimeout = 10 * time.Second

// unknownSizePartSize is the part size for uploads of unknown length. The
// client's own default for that case is ~537 MiB per buffered part; 16 MiB
// keeps memory per upload small and still allows objects up to ~156 GiB
// (10,000 parts).
const unknownSizePartSize = 16 << 20

// maxParts is the S3 limit on parts per multipart upload.
const maxParts = 10000

// Config selects an S3 endpoint and bucket.
type Config struct {
	// Endpoint is "host:port" or a URL such as "https://s3.example.com".
	// A URL's scheme overrides Secure.
	Endpoint string `yaml:"endpoint"`
	Bucket   string `yaml:"bucket"`
	// Region defaults to $AWS_REGION, then $AWS_DEFAULT_REGION, then whatever
	// the endpoint reports for the bucket.
	Region string `yaml:"region,omitempty"`
	// Secure selects HTTPS for a host:port endpoint.
	Secure bool `yaml:"secure,omitempty"`
	// AccessKey and SecretKey default, as a pair, to $AWS_ACCESS_KEY_ID and
	// $AWS_SECRET_ACCESS_KEY (with $AWS_SESSION_TOKEN) when both are empty.
	AccessKey string `yaml:"access_key,omitempty"`
	SecretKey string `yaml:"secret_key,omitempty"`
	// Prefix, when set, is prepended to every key (with a "/" separator) so
	// that several users can share a bucket; keys passed to and returned
	// from the store never include it.
	Prefix string `yaml:"prefix,omitempty"`
}

// String describes the configuration without its secret.
func (c Config) String() string {
	return fmt.Sprintf("s3 endpoint=%s bucket=%q prefix=%q region=%q secure=%t", c.Endpoint, c.Bucket, c.Prefix, c.Region, c.Secure)
}

// LogValue keeps the secret out of structured logs.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("endpoint", c.Endpoint),
		slog.String("bucket", c.Bucket),
		slog.String("prefix", c.Prefix),
		slog.String("region", c.Region),
		slog.Bool("secure", c.Secure),
	)
}

// Store is a store.ObjectStore on any S3-compatible endpoint.
type Store struct {
	client *minio.Client
	core   minio.Core
	bucket string
	prefix string
	cfg    Config
}

var _ store.ObjectStore = (*Store)(nil)

// Open connects to the endpoint in cfg, checks within a few seconds that it
// answers and accepts the credentials, and creates the bucket if it does not
// exist. A dead endpoint yields a one-line error such as
//
//	store: cannot reach S3 endpoint 127.0.0.1:9 (bucket "t1-data"): connection refused
//
// which still wraps the underlying cause (e.g. syscall.ECONNREFUSED).
// Secrets never appear in errors.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("store: open: no bucket configured")
	}
	if err := s3utils.CheckValidBucketName(cfg.Bucket); err != nil {
		return nil, fmt.Errorf("store: open: bucket %q: %w", cfg.Bucket, err)
	}
	host, secure, err := parseEndpoint(cfg.Endpoint, cfg.Secure)
	if err != nil {
		return nil, err
	}
	creds, err := resolveCredentials(cfg)
	if err != nil {
		return nil, err
	}
	region := cfg.Region
	if region == "" {
		region = cmp.Or(os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"))
	}
	opts := &minio.Options{Creds: creds, Secure: secure, Region: region}
	client, err := minio.New(host, opts)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", host, err)
	}
	s := &Store{
		client: client,
		core:   minio.Core{Client: client},
		bucket: cfg.Bucket,
		prefix: normalizePrefix(cfg.Prefix),
		cfg:    cfg,
	}
	s.cfg.Region = region

	// A second client without retries, so that an unreachable endpoint is
	// reported at once with its real cause rather than as a timeout.
	probeOpts := *opts
	probeOpts.MaxRetries = 1
	probe, err := minio.New(host, &probeOpts)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", host, err)
	}
	if err := ensureBucket(ctx, probe, host, cfg.Bucket, region); err != nil {
		return nil, err
	}
	return s, nil
}

// Config is the configuration the store was opened with (its region
// resolved), for handing the same store to another process, e.g. an
// external trainer. Empty keys mean the process's AWS_* variables.
func (s *Store) Config() Config { return s.cfg }

func ensureBucket(ctx context.Context, c *minio.Client, host, bucket, region string) error {
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	exists, err := c.BucketExists(pctx, bucket)
	if err != nil {
		return endpointError(ctx, host, bucket, err)
	}
	if exists {
		return nil
	}
	err = c.MakeBucket(pctx, bucket, minio.MakeBucketOptions{Region: region})
	if err != nil && minio.ToErrorResponse(err).Code != minio.BucketAlreadyOwnedByYou {
		return fmt.Errorf("store: create bucket %q at %s: %w", bucket, host, cause(err))
	}
	return nil
}

// endpointError turns a failed probe into one readable line.
func endpointError(ctx context.Context, host, bucket string, err error) error {
	var resp minio.ErrorResponse
	if errors.As(err, &resp) && resp.StatusCode != 0 {
		switch resp.StatusCode {
		case http.StatusForbidden, http.StatusUnauthorized:
			return fmt.Errorf("store: S3 endpoint %s denied access to bucket %q (check credentials): %w", host, bucket, err)
		default:
			return fmt.Errorf("store: S3 endpoint %s (bucket %q): %w", host, bucket, err)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return fmt.Errorf("store: cannot reach S3 endpoint %s (bucket %q): no answer within %s: %w", host, bucket, probeTimeout, context.DeadlineExceeded)
	}
	return fmt.Errorf("store: cannot reach S3 endpoint %s (bucket %q): %w", host, bucket, cause(err))
}

// cause strips the transport's wrappers (URL, network operation, system
// call) down to the error that says what went wrong, e.g. "connection
// refused". Other errors, including the caller's own reader errors, are
// kept whole.
func cause(err error) error {
	for {
		var next error
		switch e := err.(type) {
		case *url.Error:
			next = e.Err
		case *net.OpError:
			next = e.Err
		case *os.SyscallError:
			next = e.Err
		}
		if next == nil {
			return err
		}
		err = next
	}
}

func parseEndpoint(endpoint string, secure bool) (host string, tls bool, err error) {
	if endpoint == "" {
		return "", false, errors.New("store: open: no endpoint configured")
	}
	if !strings.Contains(endpoint, "://") {
		return endpoint, secure, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", false, fmt.Errorf("store: open: bad endpoint URL %q: %w", endpoint, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", false, fmt.Errorf("store: open: endpoint %q: scheme must be http or https", endpoint)
	}
	if u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return "", false, fmt.Errorf("store: open: endpoint %q must be scheme://host[:port] only", u.Redacted())
	}
	return u.Host, u.Scheme == "https", nil
}

func resolveCredentials(cfg Config) (*credentials.Credentials, error) {
	access, secret, token := cfg.AccessKey, cfg.SecretKey, ""
	source := "access_key/secret_key"
	if access == "" && secret == "" {
		access, secret = os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
		token = os.Getenv("AWS_SESSION_TOKEN")
		source = "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"
	}
	switch {
	case access == "" && secret == "":
		return nil, errors.New("store: open: no S3 credentials: set access_key and secret_key, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	case access == "" || secret == "":
		return nil, fmt.Errorf("store: open: incomplete S3 credentials: %s must both be set", source)
	}
	return credentials.NewStaticV4(access, secret, token), nil
}

func normalizePrefix(p string) string {
	p = strings.Trim(p, "/")
	if p == "" {
		return ""
	}
	return p + "/"
}

func (s *Store) object(key string) (string, error) {
	if key == "" {
		return "", errors.New("empty key")
	}
	return s.prefix + key, nil
}

// Put implements store.ObjectStore.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error) {
	return s.put(ctx, "put", key, r, size, opts, false)
}

// PutIfAbsent implements store.ObjectStore with an S3 conditional write
// (If-None-Match: *), which the server evaluates atomically at the moment the
// object would become visible, including at the completion of a multipart
// upload.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error) {
	return s.put(ctx, "put-if-absent", key, r, size, opts, true)
}

func (s *Store) put(ctx context.Context, op, key string, r io.Reader, size int64, opts store.PutOptions, ifAbsent bool) (store.ObjectInfo, error) {
	name, err := s.object(key)
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("store: %s %q: %w", op, key, err)
	}
	if err := checkLength(r, size); err != nil {
		return store.ObjectInfo{}, fmt.Errorf("store: %s %q: %w", op, key, err)
	}
	meta := lowerKeys(opts.Metadata)
	po := minio.PutObjectOptions{ContentType: opts.ContentType, UserMetadata: meta}
	if size < 0 {
		po.PartSize = unknownSizePartSize
	}

	var up minio.UploadInfo
	switch {
	case !ifAbsent:
		up, err = s.client.PutObject(ctx, s.bucket, name, r, size, po)
	case size >= 0 && size <= unknownSizePartSize:
		// A single PUT, which the client sends with the condition intact.
		po.SetMatchETagExcept("*")
		up, err = s.client.PutObject(ctx, s.bucket, name, r, size, po)
		if err != nil && !isPreconditionFailed(err) && ctx.Err() == nil && size > 0 {
			// A server refuses the condition as soon as it has the
			// headers and may close the connection while the body is
			// still on its way: the client then reports the reset, not
			// the refusal. An object there now is the refusal's reason
			// (or this write, landed before its answer was lost).
			if _, serr := s.client.StatObject(ctx, s.bucket, name, minio.StatObjectOptions{}); serr == nil {
				err = store.ErrExists
			}
		}
	default:
		up, err = s.putIfAbsentParts(ctx, name, r, size, po)
	}
	if err != nil {
		if errors.Is(err, store.ErrExists) || (ifAbsent && isPreconditionFailed(err)) {
			return store.ObjectInfo{}, fmt.Errorf("store: %s %q: %w", op, key, store.ErrExists)
		}
		return store.ObjectInfo{}, fmt.Errorf("store: %s %q: %w", op, key, cause(err))
	}
	ct := opts.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	return store.ObjectInfo{
		Key:          key,
		Size:         up.Size,
		ETag:         up.ETag,
		LastModified: up.LastModified,
		ContentType:  ct,
		Metadata:     meta,
	}, nil
}

// putIfAbsentParts writes a conditional object that may need a multipart
// upload. The client's own multipart path drops If-None-Match from
// CompleteMultipartUpload, which would make the write unconditional, so the
// parts are driven here and the condition goes on the completion, where the
// server checks it atomically as it publishes the object.
func (s *Store) putIfAbsentParts(ctx context.Context, name string, r io.Reader, size int64, po minio.PutObjectOptions) (minio.UploadInfo, error) {
	// All data goes over the wire before the server can refuse the
	// completion; a quick look first spares that in the common case of a
	// retried, already finished write.
	if _, err := s.client.StatObject(ctx, s.bucket, name, minio.StatObjectOptions{}); err == nil {
		return minio.UploadInfo{}, store.ErrExists
	}
	partSize := int64(unknownSizePartSize)
	if size >= 0 {
		r = io.LimitReader(r, size)
		partSize = max(partSize, (size+maxParts-1)/maxParts)
	}
	cond := minio.PutObjectOptions{}
	cond.SetMatchETagExcept("*")

	buf := make([]byte, partSize)
	n, rerr := io.ReadFull(r, buf)
	if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
		// Short enough for a single PUT after all.
		if size >= 0 && int64(n) != size {
			return minio.UploadInfo{}, fmt.Errorf("reader ended after %d of %d bytes", n, size)
		}
		po.SetMatchETagExcept("*")
		po.PartSize = 0
		return s.client.PutObject(ctx, s.bucket, name, bytes.NewReader(buf[:n]), int64(n), po)
	}
	if rerr != nil {
		return minio.UploadInfo{}, rerr
	}

	po.PartSize = 0
	uploadID, err := s.core.NewMultipartUpload(ctx, s.bucket, name, po)
	if err != nil {
		return minio.UploadInfo{}, err
	}
	completed := false
	defer func() {
		if !completed {
			// Parts of an abandoned upload occupy space until aborted.
			_ = s.core.AbortMultipartUpload(context.WithoutCancel(ctx), s.bucket, name, uploadID)
		}
	}()

	var parts []minio.CompletePart
	var total int64
	for {
		if len(parts) == maxParts {
			return minio.UploadInfo{}, fmt.Errorf("object exceeds %d parts of %d bytes", maxParts, partSize)
		}
		num := len(parts) + 1
		part, err := s.core.PutObjectPart(ctx, s.bucket, name, uploadID, num, bytes.NewReader(buf[:n]), int64(n), minio.PutObjectPartOptions{})
		if err != nil {
			return minio.UploadInfo{}, err
		}
		parts = append(parts, minio.CompletePart{PartNumber: num, ETag: part.ETag})
		total += int64(n)
		if rerr != nil {
			break // that part was the short last one
		}
		n, rerr = io.ReadFull(r, buf)
		if rerr == io.EOF {
			break
		}
		if rerr != nil && rerr != io.ErrUnexpectedEOF {
			return minio.UploadInfo{}, rerr
		}
	}
	if size >= 0 && total != size {
		return minio.UploadInfo{}, fmt.Errorf("reader ended after %d of %d bytes", total, size)
	}
	up, err := s.core.CompleteMultipartUpload(ctx, s.bucket, name, uploadID, parts, cond)
	if err != nil {
		return minio.UploadInfo{}, err
	}
	completed = true
	up.Size = total
	return up, nil
}

// checkLength fails fast when a seekable reader holds fewer than size
// bytes: the client retries uploads from seekable readers, with backoff,
// and would retry this doomed one for seconds.
func checkLength(r io.Reader, size int64) error {
	sk, ok := r.(io.Seeker)
	if !ok || size < 0 {
		return nil
	}
	cur, err := sk.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil
	}
	end, err := sk.Seek(0, io.SeekEnd)
	if _, serr := sk.Seek(cur, io.SeekStart); serr != nil {
		return fmt.Errorf("rewind reader: %w", serr)
	}
	if err == nil && end-cur < size {
		return fmt.Errorf("reader holds %d bytes, fewer than the size given, %d", end-cur, size)
	}
	return nil
}

// Get implements store.ObjectStore.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, store.ObjectInfo, error) {
	name, err := s.object(key)
	if err != nil {
		return nil, store.ObjectInfo{}, fmt.Errorf("store: get %q: %w", key, err)
	}
	rc, oi, _, err := s.core.GetObject(ctx, s.bucket, name, minio.GetObjectOptions{})
	if err != nil {
		return nil, store.ObjectInfo{}, s.readError("get", key, err)
	}
	return rc, s.info(oi), nil
}

// GetRange implements store.ObjectStore.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	name, err := s.object(key)
	if err != nil {
		return nil, fmt.Errorf("store: get range %q: %w", key, err)
	}
	if offset < 0 || length == 0 || length < -1 {
		return nil, fmt.Errorf("store: get range %q: invalid range offset=%d length=%d", key, offset, length)
	}
	var opts minio.GetObjectOptions
	switch {
	case length > 0:
		err = opts.SetRange(offset, offset+length-1)
	case offset > 0:
		err = opts.SetRange(offset, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get range %q: %w", key, err)
	}
	rc, _, _, err := s.core.GetObject(ctx, s.bucket, name, opts)
	if err != nil {
		return nil, s.readError("get range", key, err)
	}
	return rc, nil
}

// Stat implements store.ObjectStore.
func (s *Store) Stat(ctx context.Context, key string) (store.ObjectInfo, error) {
	name, err := s.object(key)
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("store: stat %q: %w", key, err)
	}
	oi, err := s.client.StatObject(ctx, s.bucket, name, minio.StatObjectOptions{})
	if err != nil {
		return store.ObjectInfo{}, s.readError("stat", key, err)
	}
	return s.info(oi), nil
}

// List implements store.ObjectStore.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[store.ObjectInfo, error] {
	return func(yield func(store.ObjectInfo, error) bool) {
		// The client's iterator runs until its context ends; cancelling on
		// return lets callers break out of the loop without leaking it.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		opts := minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}
		for oi := range s.client.ListObjectsIter(ctx, s.bucket, opts) {
			if oi.Err != nil {
				yield(store.ObjectInfo{}, fmt.Errorf("store: list %q: %w", prefix, cause(oi.Err)))
				return
			}
			if !yield(s.info(oi), nil) {
				return
			}
		}
	}
}

// Delete implements store.ObjectStore.
func (s *Store) Delete(ctx context.Context, key string) error {
	name, err := s.object(key)
	if err != nil {
		return fmt.Errorf("store: delete %q: %w", key, err)
	}
	err = s.client.RemoveObject(ctx, s.bucket, name, minio.RemoveObjectOptions{})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("store: delete %q: %w", key, cause(err))
	}
	return nil
}

func (s *Store) info(oi minio.ObjectInfo) store.ObjectInfo {
	info := store.ObjectInfo{
		Key:          strings.TrimPrefix(oi.Key, s.prefix),
		Size:         oi.Size,
		ETag:         oi.ETag,
		LastModified: oi.LastModified,
		ContentType:  oi.ContentType,
	}
	if len(oi.UserMetadata) > 0 {
		info.Metadata = lowerKeys(oi.UserMetadata)
	}
	return info
}

func (s *Store) readError(op, key string, err error) error {
	if isNotFound(err) {
		return fmt.Errorf("store: %s %q: %w", op, key, store.ErrNotFound)
	}
	return fmt.Errorf("store: %s %q: %w", op, key, cause(err))
}

func isNotFound(err error) bool {
	resp := minio.ToErrorResponse(err)
	return resp.Code == minio.NoSuchKey || (resp.StatusCode == http.StatusNotFound && resp.Code != minio.NoSuchBucket)
}

func isPreconditionFailed(err error) bool {
	resp := minio.ToErrorResponse(err)
	return resp.StatusCode == http.StatusPreconditionFailed || resp.Code == "PreconditionFailed"
}

func lowerKeys(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[strings.ToLower(k)] = v
	}
	return out
}
