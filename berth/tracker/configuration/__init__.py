"""The tracker's configuration (``config``), the documents it is read from (``documents``), and
provider config files (``provider_config``)."""
