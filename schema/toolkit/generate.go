package toolkit

//go:generate go run ./internal/gen
