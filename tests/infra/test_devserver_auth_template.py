"""The dev server authenticates each route as the SAM transform tells API
Gateway to (Template.route_auth, read from template.yaml's Api events), for
every value of ClientAuth."""

from __future__ import annotations

import pytest

from localrun.template import RouteAuth, Template
from tests.support.sam import method_security, translate

# A method's security in the transformed API, as the dev server reads it.
AS_READ = {"AWS_IAM": RouteAuth(sigv4=True, api_key=False), "api_key": RouteAuth(sigv4=False, api_key=True)}
OPEN = RouteAuth(sigv4=False, api_key=False)


@pytest.mark.parametrize("client_auth", ["AWS_IAM", "API_KEY", "NONE"])
def test_the_dev_server_authenticates_each_route_as_the_transformed_template_says(client_auth):
    deployed = {
        route: next((AS_READ[name] for item in security for name in item if name in AS_READ), OPEN)
        for route, security in method_security(translate(ClientAuth=client_auth)).items()
    }
    assert Template(parameter_overrides={"ClientAuth": client_auth}).route_auth() == deployed


def test_a_parameter_value_the_template_does_not_allow_is_refused():
    with pytest.raises(ValueError, match="AWS_IAM, API_KEY, NONE"):
        Template(parameter_overrides={"ClientAuth": "iam"})
