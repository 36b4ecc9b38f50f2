//! `weft hold add|rm|ls` (issue #46): legal holds placed by a Group's approver through its
//! own session (`/v1/groups/{g}/holds`), on what that session sees; the operator's are
//! `weft admin hold`.

use clap::Subcommand;
use weft_api::Id;

use super::args::ClientArgs;
use super::lifecycle::{HoldArgs, hold_request};

/// What an approver does with holds.
#[derive(Debug, Subcommand)]
pub(super) enum GroupHoldAction {
    /// Places a hold on an artifact, a WorkItem or a Mission of the session's Group; prints
    /// its id.
    Add(HoldArgs),
    /// Lifts one of the Group's approvers' holds.
    Rm { hold_id: String },
    /// Lists the Group's holds the session sees, in force and lifted, as JSON.
    Ls,
}

/// `weft hold …` with the session's client.
pub(super) async fn run(client: &ClientArgs, action: GroupHoldAction) -> anyhow::Result<()> {
    let (session, api) = client.session()?;
    let group = Id::parse("group", &session.group_id)?;
    match action {
        GroupHoldAction::Add(args) => {
            let request = hold_request(args)?;
            let hold = api.place_group_hold(&group, &request).await?;
            // The id alone on stdout, for scripts (`weft hold rm $(weft hold add …)`).
            println!("{}", hold.hold_id);
        }
        GroupHoldAction::Rm { hold_id } => {
            let hold = api
                .lift_group_hold(&group, &Id::parse("hold", &hold_id)?)
                .await?;
            println!(
                "hold {hold_id} lifted at {}",
                hold.lifted_at.as_deref().unwrap_or("?")
            );
        }
        GroupHoldAction::Ls => {
            let holds = api.group_holds(&group).await?;
            println!("{}", serde_json::to_string_pretty(&holds)?);
        }
    }
    Ok(())
}
