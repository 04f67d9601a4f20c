package flux

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// ExtractTarGz unpacks the gzip-compressed tarball at src into dst, as
// source-controller extracts an OCI layer and the controllers unpack an
// artifact. Only directories and regular files are written; links and
// devices are left out, and dst is opened with os.Root, so nothing is
// written outside it. A file larger than maxFileBytes, or more than
// maxTotalBytes in all, is an error.
func ExtractTarGz(src, dst string, maxFileBytes, maxTotalBytes int64) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("extracting %s: requires gzip-compressed body: %w", src, err)
	}
	defer zr.Close()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(zr)
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("extracting %s: %w", src, err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "/"))
		if name == "." || name == ".." || strings.HasPrefix(name, "../") {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return fmt.Errorf("extracting %s: %s: %w", src, h.Name, err)
			}
		case tar.TypeReg:
			if h.Size > maxFileBytes {
				return fmt.Errorf("extracting %s: %s is %d bytes, more than the limit of %d", src, h.Name, h.Size, maxFileBytes)
			}
			if total += h.Size; total > maxTotalBytes {
				return fmt.Errorf("extracting %s: more than the limit of %d bytes", src, maxTotalBytes)
			}
			if err := writeEntry(root, name, tr); err != nil {
				return fmt.Errorf("extracting %s: %s: %w", src, h.Name, err)
			}
		}
	}
}

func writeEntry(root *os.Root, name string, r io.Reader) error {
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	out, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
