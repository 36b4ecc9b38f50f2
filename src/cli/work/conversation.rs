//! The WorkItem conversation before acceptance from the command line (CON-2, CON-4):
//! `weft work ask` (a candidate of a live offer) and `weft work answer` (the Coordinator).
//! The server decides who may ask and answer; these only shape and sign the payloads.

use weft_api::Id;
use weft_api::work::CommandType;
use weft_api::work::conversation::{Resolution, WorkAnswer, WorkAsk};

use super::signer::Signer;
use crate::cli::errors::wire_word;
use crate::cli::work_args::{AnswerArgs, AskArgs};

/// `work.ask`: `--offer`, else the newest live offer naming this agent; `--question`, else a
/// fresh id (printed in the answer's view).
pub(super) async fn ask(signer: &Signer, args: AskArgs) -> anyhow::Result<()> {
    let work_item_id = Id::parse("work item", &args.work_item)?;
    let offer_id = signer.offer_for(&work_item_id, args.offer).await?;
    let question_id = match args.question {
        Some(question) => Id::parse("question", &question)?,
        None => Id::parse("question", &format!("q-{}", uuid::Uuid::now_v7()))?,
    };
    let payload = WorkAsk {
        work_item_id,
        offer_id,
        question_id,
        text: args.text,
    };
    signer
        .send(CommandType::WorkAsk, &payload, &args.command, None)
        .await
}

/// `work.answer`, with the resolution it announces (CON-4; default `clarified`).
pub(super) async fn answer(signer: &Signer, args: AnswerArgs) -> anyhow::Result<()> {
    let payload = WorkAnswer {
        work_item_id: Id::parse("work item", &args.work_item)?,
        question_id: Id::parse("question", &args.question)?,
        text: args.text,
        resolution: args
            .resolution
            .map(|text| wire_word::<Resolution>("resolution", &text))
            .transpose()?,
    };
    signer
        .send(CommandType::WorkAnswer, &payload, &args.command, None)
        .await
}
