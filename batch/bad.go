package batch

import "errors"

// BadInputError marks a failure caused by the input (a batch whose tables
// disagree, a checkpoint that does not load, an external trainer that
// exits non-zero): retrying cannot help, so stages fail the event. It
// lives with the batch, the input every update starts from; package
// checkpoint and the trainers classify their failures by it too.
type BadInputError struct{ Err error }

func (e *BadInputError) Error() string { return e.Err.Error() }
func (e *BadInputError) Unwrap() error { return e.Err }

// Bad wraps err as a BadInputError (nil stays nil).
func Bad(err error) error {
	if err == nil {
		return nil
	}
	return &BadInputError{err}
}

// IsBad reports whether err, or anything it wraps, is a BadInputError.
func IsBad(err error) bool {
	var b *BadInputError
	return errors.As(err, &b)
}
