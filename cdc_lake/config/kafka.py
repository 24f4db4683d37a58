"""Kafka, the schema registry and Kafka Connect: the consumer's settings, the connectors' client settings
(whose secrets must stay ``${env:VAR}`` references the Connect workers resolve) and the REST clients'."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from cdc_lake.redaction import is_secret_key
from cdc_lake.sources.settings import ConfigModel as _Model
from cdc_lake.sources.settings import PassthroughValue, Secret

_CONNECT_ENV_VALUE = re.compile(r"^\$\{env:[A-Za-z_][A-Za-z0-9_]*\}$")
# One ``name=value`` option of a JAAS line (``Module required a="x" b=y;``); quoted values may hold escapes.
_JAAS_OPTION = re.compile(r'([A-Za-z_][\w.-]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;"]+)')


def _is_a_file(value: str) -> str:
    if not Path(value).expanduser().is_file():
        raise PydanticCustomError("no_file", "no file at {path}", {"path": value})
    return value


LocalFile = Annotated[str, AfterValidator(_is_a_file)]
"""A file cdc-lake reads itself (a CA bundle, a client certificate or key), used as written: it must
exist when the config loads."""


FIXED_CONSUMER_SETTINGS: Final = ("auto.offset.reset", "enable.auto.commit")
"""librdkafka settings cdc-lake sets itself on every consumer of a planned offset range."""


class KafkaSettings(_Model):
    """The Kafka cluster Debezium writes to; ``consumer`` is passed to librdkafka as is."""

    bootstrap_servers: str = "127.0.0.1:19092"
    consumer: dict[str, PassthroughValue] = Field(default_factory=dict)
    connector_clients: dict[str, PassthroughValue] = Field(default_factory=dict)
    """Java Kafka client settings for the connectors' own clients (MySQL/MariaDB schema history), e.g.
    ``security.protocol``, ``sasl.jaas.config``; ``${env:VAR}`` is resolved by the Connect workers."""

    @field_validator("connector_clients")
    @classmethod
    def _secrets_stay_on_the_workers(cls, value: dict[str, PassthroughValue]) -> dict[str, PassthroughValue]:
        # The settings are copied into connector configs, which Connect's REST API shows: a secret there
        # must be a ${env:VAR} the workers resolve (a ${VAR} of this file is already expanded here).
        for key, text in value.items():
            held = _stored_secret(key, text)
            if held is not None:
                raise PydanticCustomError(
                    "connector_client_secret",
                    "{held} must be Kafka Connect's ${env:VAR} (resolved by the Connect workers): a "
                    "literal or a ${VAR} of this file would be stored in the connector config, readable "
                    "through Connect's REST API",
                    {"held": held},
                )
        return value

    @field_validator("consumer")
    @classmethod
    def _keeps_offset_reset(cls, value: dict[str, PassthroughValue]) -> dict[str, PassthroughValue]:
        # Offset ranges are read exactly: a range start deleted by retention must fail, never jump.
        for fixed in FIXED_CONSUMER_SETTINGS:
            if fixed in value:
                raise PydanticCustomError(
                    "fixed_consumer_setting",
                    "{name} cannot be set: the applier reads exact offset ranges and fails when retention "
                    "deleted part of one",
                    {"name": fixed},
                )
        return value


def _stored_secret(key: str, value: str) -> str | None:
    """Where Java client setting ``key`` holds a secret other than a ``${env:VAR}`` (None: nowhere).

    A credential-named setting must be exactly ``${env:VAR}``; a JAAS line (``sasl.jaas.config``)
    may hold anything but its credential-named options (``password``, ``clientSecret``, …).
    """
    if not is_secret_key(key):
        return None
    if key.lower().endswith("jaas.config"):
        for option, raw in _JAAS_OPTION.findall(value):
            if is_secret_key(option) and not _CONNECT_ENV_VALUE.match(raw.strip('"')):
                return f"{key}: {option}"
        return None
    return None if _CONNECT_ENV_VALUE.match(value.strip()) else key


class SchemaRegistrySettings(_Model):
    """The Confluent-compatible schema registry that holds the Avro schemas.

    ``url`` is its Confluent API (Confluent, Karapace, Apicurio's ``/apis/ccompat/v7``); ``user`` and
    ``password`` authenticate the decoder.  ``converter`` is the Avro converter the connectors use:
    ``apicurio`` (the local stack's, talking to Apicurio's native API on the same server) or
    ``confluent`` (``io.confluent.connect.avro.AvroConverter`` against ``url``).
    ``connect_credentials_env`` names the environment variable ON THE CONNECT WORKERS that holds
    the converter's credentials (``user:password``, or a token when ``connect_credentials_kind``
    is ``bearer``): connector configs carry only ``${env:VAR}``.
    ``ca_cert``: the CA bundle that verifies an ``https://`` registry (default: the system's);
    ``client_cert`` and ``client_key`` (PEM, both or neither): mutual TLS.  They are cdc-lake's own
    (driver and executors); the converter's TLS is configured on the Connect workers.
    """

    url: str = "http://127.0.0.1:18081/apis/ccompat/v7"
    user: str | None = None
    password: Secret | None = None
    bearer_token: Secret | None = None
    ca_cert: LocalFile | None = None
    client_cert: LocalFile | None = None
    client_key: LocalFile | None = None
    converter: Literal["apicurio", "confluent"] = "apicurio"
    connect_credentials_env: str | None = None
    connect_credentials_kind: Literal["user_info", "bearer"] = "user_info"

    def basic_auth(self) -> tuple[str, str] | None:
        """(user, password) for HTTP basic authentication, when a user is configured."""
        if self.user is None:
            return None
        return self.user, self.password.get_secret_value() if self.password is not None else ""

    def auth_headers(self) -> dict[str, str]:
        """The ``Authorization: Bearer`` header, when a token is configured."""
        if self.bearer_token is None:
            return {}
        return {"Authorization": f"Bearer {self.bearer_token.get_secret_value()}"}

    def client_certificate(self) -> tuple[str, str] | None:
        """(certificate, key) for mutual TLS, when configured."""
        if self.client_cert is None or self.client_key is None:
            return None
        return self.client_cert, self.client_key

    @model_validator(mode="after")
    def _client_certificate_needs_its_key(self) -> SchemaRegistrySettings:
        pair = {"client_cert": self.client_cert, "client_key": self.client_key}
        for given, missing in (("client_cert", "client_key"), ("client_key", "client_cert")):
            if pair[given] is not None and pair[missing] is None:
                raise PydanticCustomError(
                    "registry_tls",
                    "{given} is set but {missing} is not (mutual TLS needs both)",
                    {"given": given, "missing": missing},
                )
        return self

    @model_validator(mode="after")
    def _one_way_to_authenticate(self) -> SchemaRegistrySettings:
        if self.bearer_token is not None and self.user is not None:
            raise PydanticCustomError("registry_auth", "set either user/password or bearer_token, not both")
        return self

    @model_validator(mode="after")
    def _credentials_need_confluent(self) -> SchemaRegistrySettings:
        if self.connect_credentials_env is not None and self.converter != "confluent":
            raise PydanticCustomError(
                "registry_auth",
                "connect_credentials_env needs converter: confluent "
                "(the Apicurio converter is rendered without auth)",
            )
        return self


class KafkaConnectSettings(_Model):
    """The Kafka Connect REST endpoint running Debezium.

    ``user``/``password``: HTTP basic authentication (Connect's ``BasicAuthSecurityRestExtension``).
    ``ca_cert``: the CA bundle that verifies an ``https://`` endpoint (default: the system's).
    """

    url: str = "http://127.0.0.1:18083"
    user: str | None = None
    password: Secret | None = None
    ca_cert: LocalFile | None = None

    @model_validator(mode="after")
    def _password_needs_user(self) -> KafkaConnectSettings:
        if self.password is not None and self.user is None:
            raise PydanticCustomError("connect_auth", "password is set but user is not")
        return self
