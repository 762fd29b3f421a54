//! The `karpenter.sh/disrupted:NoSchedule` taint a node carries while it is disrupted or
//! terminated, put on and taken off without touching anyone else's taints.

use k8s_openapi::api::core::v1::Taint as ApiTaint;
use nodewright_core::taints::DISRUPTED_TAINT;

fn disrupted_taint() -> ApiTaint {
    ApiTaint {
        key: DISRUPTED_TAINT.into(),
        value: None,
        effect: "NoSchedule".into(),
        time_added: None,
    }
}

/// A node's taints with `karpenter.sh/disrupted:NoSchedule` put `on` or taken off, or `None`
/// when they already are as asked (nothing to write). As upstream, the taint is matched by key
/// and effect: a `karpenter.sh/disrupted` taint of another effect is someone else's and stays.
pub fn with_disrupted_taint(taints: &[ApiTaint], on: bool) -> Option<Vec<ApiTaint>> {
    let ours = |t: &ApiTaint| t.key == DISRUPTED_TAINT && t.effect == "NoSchedule";
    if taints.iter().any(ours) == on {
        return None;
    }
    let mut next: Vec<ApiTaint> = taints.iter().filter(|t| !ours(t)).cloned().collect();
    if on {
        next.push(disrupted_taint());
    }
    Some(next)
}
