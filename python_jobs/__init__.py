"""The thin Python layer of the lakehouse: Spark session, ingestion, simulator."""
