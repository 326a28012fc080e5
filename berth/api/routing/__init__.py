"""The URL map: a route (``route``), every path with its methods, microversions and policy rules
(``routes``), and the OpenAPI document built from them (``openapi``)."""
