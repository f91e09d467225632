//! What the controller's tests share beside the object builders (`trainguard_test_support::objects`):
//! the API-call table checked over what the fake API (`trainguard_fake_api`, the test kit) saw
//! ([`RbacChecked`]).

/// The API-call table (`crate::rbac`) checked over the requests a fake API recorded: what the
/// controller's tests assert is empty after driving the controller against the fake.
pub(crate) trait RbacChecked {
    /// Requests outside the API-call table, and requests the fake neither modelled nor had scripted.
    fn violations(&self) -> Vec<String>;
}

impl RbacChecked for trainguard_fake_api::FakeApi {
    fn violations(&self) -> Vec<String> {
        let outside = self.seen().into_iter().filter(|s| !crate::rbac::allowed(&s.rbac.0, &s.rbac.1, &s.rbac.2));
        outside
            .map(|s| format!("not in the API-call table: {:?} ({} {})", s.rbac, s.method, s.path))
            .chain(self.unexpected().into_iter().map(|u| format!("unscripted request: {u}")))
            .collect()
    }
}
