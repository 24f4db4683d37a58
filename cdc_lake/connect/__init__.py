"""Kafka Connect as cdc-lake uses it: connector configs rendered from the reviewed template each engine
declares in its package (:mod:`~cdc_lake.connect.render`), a REST client with retries
(:mod:`~cdc_lake.connect.client`), and waits for a connector to stream (:mod:`~cdc_lake.connect.streaming`).

The onboarding, the bootstrap's hand-off and the lag report all talk to Connect through these modules.
"""
