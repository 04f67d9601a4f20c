package schema

//go:generate go run ./internal/gen
