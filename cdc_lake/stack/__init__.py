"""The local stack: every service cdc-lake needs, on 127.0.0.1, from Debian, Maven Central, Go proxy."""
