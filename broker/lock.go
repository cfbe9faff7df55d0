package broker

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
)

// lockDir takes an exclusive advisory lock on dir/LOCK so two processes never share a store.
func lockDir(fs storeFS, dir string) (io.Closer, error) {
	f, err := fs.Lock(filepath.Join(dir, "LOCK"))
	if errors.Is(err, ErrLocked) {
		return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	return f, nil
}
