package isolate

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MaxFrame bounds one frame in either direction: a job (a chart's files
// and values) or a result (rendered manifests). It matches
// manifest.DefaultMaxTotalBytes, the most truce reads of a whole render.
const MaxFrame = 256 << 20

// hello is the first frame a worker writes: proof that the executable is
// truce's and speaks this protocol.
const hello = "truce-isolate/1"

// Response status bytes.
const (
	statusOK  byte = 0
	statusErr byte = 1
)

// errFrameTooLarge is returned for a frame longer than the limit.
var errFrameTooLarge = errors.New("frame larger than the limit")

// writeFrame writes body prefixed by its length (4 bytes, big-endian).
func writeFrame(w io.Writer, body []byte) error {
	if len(body) > MaxFrame {
		return fmt.Errorf("%w: %d bytes, the limit is %d", errFrameTooLarge, len(body), MaxFrame)
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(body)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	_, err := w.Write(body)
	return err
}

// readFrame reads one frame of at most limit bytes. A clean end of input
// before a frame starts is io.EOF; one inside a frame io.ErrUnexpectedEOF.
func readFrame(r *bufio.Reader, limit int) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if uint64(size) > uint64(limit) {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", errFrameTooLarge, size, limit)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return body, nil
}

// encodeRequest is a request's body: the job's name (its length as a
// uvarint, then the name) and its payload.
func encodeRequest(job string, payload []byte) []byte {
	b := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(job)+len(payload)), uint64(len(job)))
	b = append(b, job...)
	return append(b, payload...)
}

// decodeRequest splits a request's body.
func decodeRequest(body []byte) (job string, payload []byte, err error) {
	n, k := binary.Uvarint(body)
	if k <= 0 || n > uint64(len(body)-k) {
		return "", nil, errors.New("malformed request: bad job name length")
	}
	return string(body[k : k+int(n)]), body[k+int(n):], nil
}

// encodeResponse is a response's body: a status byte, then the result or
// the job's error text.
func encodeResponse(result []byte, jobErr error) []byte {
	if jobErr != nil {
		return append([]byte{statusErr}, jobErr.Error()...)
	}
	return append([]byte{statusOK}, result...)
}

// decodeResponse splits a response's body; a job's own failure is a
// *JobError.
func decodeResponse(body []byte) ([]byte, error) {
	if len(body) == 0 {
		return nil, errors.New("malformed response: empty")
	}
	switch body[0] {
	case statusOK:
		return body[1:], nil
	case statusErr:
		return nil, &JobError{Msg: string(body[1:])}
	default:
		return nil, fmt.Errorf("malformed response: status %d", body[0])
	}
}
