"""The local stack: every service cdc-lake needs, started on 127.0.0.1 from Debian, Maven Central and the Go proxy."""
