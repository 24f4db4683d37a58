"""Operating cdc-lake: lag, metrics, alert rules and source-versus-lake validation."""
